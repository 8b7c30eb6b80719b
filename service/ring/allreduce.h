// Ring allreduce on a node's buffer of `count` elements, in place or reading
// the node's input from options.input (then the reduce-scatter reads it and
// every byte of the buffer is written: the input needs no copy): a ring
// reduce-scatter, then a ring allgather of the reduced segments over the same
// buffer (UCC's allreduce_ring chains the two the same way). Each node sends
// 2(N-1)/N of the buffer, the bandwidth lower bound.
//
// The allgather's tag steps follow the reduce-scatter's (N-1 each, from
// options.first_step), so both phases share one sequence number.
//
// avg: divided once, by `divisor` (the number of contributions in the job:
// N, or N*L when each node's buffer already sums L local ranks), on each
// segment's owner before the allgather; see ReduceScatter for the rounding of
// f16/bf16 partial sums. N = 1: no messages, done on the first progress().
#pragma once

#include <cstddef>

#include "common/dtype.h"
#include "service/ring/allgather.h"
#include "service/ring/reduce_scatter.h"
#include "service/ring/task.h"

namespace ringsync::service::ring {

class Allreduce : public Task {
 public:
  Allreduce(transport::Transport& transport, void* data, std::size_t count, DType dtype,
            ReduceOp op, std::size_t divisor, const RingOptions& options);

  Status post() override;
  TaskState progress() override;
  void abort(const Status& why) override;
  const Status& status() const override;

  // Whether the reduce-scatter is done and the allgather runs (for timelines).
  bool gathering() const { return gathering_; }

 private:
  static RingOptions allgather_options(const transport::Transport& transport, RingOptions options);

  int nodes_;
  RingOptions options_;
  ReduceScatter reduce_scatter_;
  Allgather allgather_;
  Status refused_;
  bool gathering_ = false;
};

}  // namespace ringsync::service::ring
