// Ring reduce-scatter, in place: every node holds a buffer of `count`
// elements; afterwards node r's segment r (Partition(count, N, chunk)) holds
// the reduction of segment r over all N nodes.
//
// N-1 steps. At step s node r sends segment r-s-1 to the node on its right
// and receives segment r-s-2 from the node on its left into scratch, then
// reduces it into its own copy (srcs = {own, received}); that partial result is
// what it sends at step s+1. The segment received at the last step, r, is
// complete. Each segment moves chunk by chunk, pipelined (ChunkPipeline).
//
// avg: the ring sums, and node r divides its finished segment by `divisor`,
// the number of contributions (N, or N*L when each node already holds a sum
// of L ranks' buffers). Integers divide the wrapped sum, truncating.
//
// Out of place (options.input): the input is read where the steps above read
// "its own copy" (the step-0 send and each reduction, srcs = {input, received}
// into the buffer), and never written. Segment r-1, which the ring never
// reduces here, is left as it was in the buffer.
//
// Segments other than r hold partial results afterwards. f16 and bf16 partial
// sums are rounded to the element type at every step (they travel as that
// type), unlike one local reduction, which accumulates in f32 and rounds once.
// N = 1: no messages; only avg's division.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/dtype.h"
#include "service/ring/chunk_pipeline.h"
#include "service/ring/partition.h"

namespace ringsync::service::ring {

class ReduceScatter : public ChunkPipeline {
 public:
  ReduceScatter(transport::Transport& transport, void* data, std::size_t count, DType dtype,
                ReduceOp op, std::size_t divisor, const RingOptions& options);

  // The partition of the buffer among the nodes: this node's result is
  // partition().segment(rank).
  const Partition& partition() const { return partition_; }

 private:
  Status plan() override;
  void land(std::size_t index, const Recv& recv, const std::byte* scratch) override;

  std::byte* data_;
  const std::byte* input_;  // this node's input: data_ unless out of place
  DType dtype_;
  ReduceOp op_;
  std::size_t divisor_;
  RingOptions options_;
  Partition partition_;
  std::size_t last_step_first_recv_ = SIZE_MAX;  // receives from here on complete this node's segment
};

}  // namespace ringsync::service::ring
