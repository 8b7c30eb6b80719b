// Allreduce by recursive halving and doubling (Rabenseifner's algorithm, as in
// MPICH's and Open MPI's "redscat_allgather"), in place on a node's buffer of
// `count` elements: the latency-optimal choice for small and mid-size buffers,
// where the ring's 2(N-1) steps cost more than its bandwidth saves.
//
// p = the largest power of two <= N, rem = N - p. The buffer is cut into p
// blocks whose sizes differ by at most one element (as Partition cuts
// segments).
//
// 1. Fold to a power of two (only when rem > 0): of the first 2*rem nodes,
//    each odd node sends its whole buffer to the even node below it, which
//    reduces it into its own; the odd nodes then wait for step 4. The other
//    p nodes take part under new numbers 0..p-1 (even node 2i is i, node
//    j >= 2*rem is j - rem).
// 2. Reduce-scatter by recursive halving, log2(p) steps with distance
//    d = p/2, p/4, ..., 1: node i exchanges with node i^d; of the blocks it
//    still holds, it sends the half that node i^d keeps and reduces the half
//    it keeps with the one received. Afterwards node i holds block i fully
//    reduced (avg divides it there, once, by `divisor`).
// 3. Allgather by recursive doubling, log2(p) steps with d = 1, 2, ..., p/2:
//    node i sends the d blocks it holds to node i^d and receives that node's
//    d blocks, straight into place. Afterwards it holds every block.
// 4. Unfold (only when rem > 0): each even node of the first 2*rem sends the
//    whole result to the odd node above it.
//
// Messages per node (each cut into chunks of options.chunk_bytes; a message
// of an empty range is not sent): a node of the power of two sends and
// receives 2*log2(p), about 2(p-1)/p of the buffer each way; a folding even
// node receives and sends one whole buffer more; an odd node of the first
// 2*rem sends and receives one whole buffer only. Every block is reduced on
// one node and then copied, so every node ends with the same bits.
//
// Tags: sequence options.sequence, steps options.first_step on: the fold is
// step 0, halving steps 1..log2(p), doubling steps after them, the unfold the
// last (tag_steps(N) in all, whether or not N is a power of two). The chunk
// number is the chunk of the step's one message.
//
// f16/bf16: partial sums travel and are rounded as the element type at every
// step, as in the ring. N = 1: no messages, only avg's division.
#pragma once

#include <cstddef>

#include "common/dtype.h"
#include "service/ring/chunk_pipeline.h"

namespace ringsync::service::ring {

class HalvingDoublingAllreduce : public ChunkPipeline {
 public:
  HalvingDoublingAllreduce(transport::Transport& transport, void* data, std::size_t count,
                           DType dtype, ReduceOp op, std::size_t divisor,
                           const RingOptions& options);

  // Tag steps an allreduce over `nodes` nodes uses from options.first_step on.
  static std::size_t tag_steps(int nodes);

 private:
  Status plan() override;
  void land(std::size_t index, const Recv& recv, const std::byte* scratch) override;

  // Plans one message's chunks to or from `peer` at tag step `step`.
  void plan_sends(int peer, std::size_t step, std::size_t begin, std::size_t count,
                  std::size_t after_landed, bool own_input);
  // Returns how many receives (chunks) it planned.
  std::size_t plan_recvs(int peer, std::size_t step, std::size_t begin, std::size_t count,
                         bool via_scratch, bool final);

  std::byte* data_;
  std::size_t count_;
  DType dtype_;
  ReduceOp op_;
  std::size_t divisor_;
  RingOptions options_;
  std::size_t chunk_elements_ = 1;
  // Receives [owned_first_recv_, owned_end_recv_) complete this node's block
  // (avg divides them).
  std::size_t owned_first_recv_ = 0;
  std::size_t owned_end_recv_ = 0;
};

}  // namespace ringsync::service::ring
