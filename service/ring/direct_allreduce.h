// Allreduce by a direct reduce-scatter and a direct allgather (the "two-shot"
// allreduce of fully connected GPU systems), in place on a node's buffer of
// `count` elements: every node talks to every other node at once, so the
// collective takes two steps at any node count, where the ring takes 2(N-1)
// and halving-doubling 2 log2(p) (plus a fold and unfold when N is not a
// power of two). It moves the ring's bytes, 2(N-1)/N of the buffer each way,
// in N-1 messages per step instead of one.
//
// The buffer is cut into N blocks whose sizes differ by at most one element
// (as Partition cuts segments); node r owns block r.
//
// 1. Reduce-scatter: in round j = 1..N-1, node r sends block r+j of its input
//    to node r+j and receives block r of node r-j's input, which it reduces
//    into its own (avg divides the block once the last contribution is in).
//    Afterwards node r holds block r fully reduced.
// 2. Allgather: in round j, node r sends its reduced block r to node r+j and
//    receives block r-j from node r-j, straight into place. A node sends only
//    after its block is complete; the block it receives lands where its
//    reduce-scatter send to that node read from, and that node sends only
//    after that data has reached it.
//
// Rounds go around the ring (node r+j receives from node r in round j), so
// every node posts its sends and receives in the same global order: with
// bounded windows no node waits on a message nobody has posted yet. Each
// block is reduced on one node and then copied, so every node ends with the
// same bits. Messages are cut into chunks of options.chunk_bytes; an empty
// block sends no message.
//
// Tags: sequence options.sequence, step options.first_step (reduce-scatter)
// and the one after (allgather); the chunk number is the chunk of the
// block's message. f16/bf16: sums are rounded as the element type after each
// contribution, as in the ring. N = 1: no messages, only avg's division.
#pragma once

#include <cstddef>

#include "common/dtype.h"
#include "service/ring/chunk_pipeline.h"

namespace ringsync::service::ring {

class DirectAllreduce : public ChunkPipeline {
 public:
  DirectAllreduce(transport::Transport& transport, void* data, std::size_t count, DType dtype,
                  ReduceOp op, std::size_t divisor, const RingOptions& options);

  // Tag steps an allreduce uses from options.first_step on: 2 at any node count.
  static constexpr std::size_t kTagSteps = 2;

 private:
  Status plan() override;
  void land(std::size_t index, const Recv& recv, const std::byte* scratch) override;

  std::byte* data_;
  std::size_t count_;
  DType dtype_;
  ReduceOp op_;
  std::size_t divisor_;
  RingOptions options_;
  // Receives from this index to the end of the reduce-scatter bring the last
  // contribution to this node's block: avg divides them.
  std::size_t last_contribution_ = 0;
  std::size_t reduce_scatter_end_ = 0;
};

}  // namespace ringsync::service::ring
