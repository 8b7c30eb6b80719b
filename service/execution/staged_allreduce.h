// A ring allreduce of this node's GPU buffer, staged through host memory while
// the ring runs (for a UCX that cannot touch device memory): RingStaging copies
// the device input into the host buffer chunk by chunk in the order the
// reduce-scatter uses it, the ring (ring::Allreduce over the host buffer, with
// RingStaging as its StageGate) sends a chunk as soon as it has landed, and every
// chunk the allgather makes final goes back to the device output at once. So the
// device -> host copy of chunk k+1 overlaps sending chunk k, and the host -> device
// copies overlap the allgather; nothing blocks the ring engine's loop.
//
// Done when the ring is done and the whole result is back on the device. A failed
// copy fails the ring (and the other way round); the task reports kError once
// neither the transport nor the copy engine can still touch the buffers.
// With one node there is no ring: the input is copied in, reduced (avg) and
// copied back out.
#pragma once

#include <memory>

#include "service/execution/ring_staging.h"
#include "service/ring/allreduce.h"
#include "service/ring/task.h"

namespace ringsync::service::execution {

class StagedAllreduce final : public ring::Task {
 public:
  // `engine` copies between the device and the host buffer (its wakeup should wake
  // whoever drives this task); `staging_chunk_bytes`: one copy at most. `keep`
  // holds whatever owns the buffers and the engine until the task is gone.
  StagedAllreduce(transport::Transport& transport, cuda::ChunkCopier& engine, StagedBuffers buffers,
                  std::size_t count, DType dtype, ReduceOp op, std::size_t divisor,
                  ring::RingOptions options, std::size_t staging_chunk_bytes,
                  std::shared_ptr<const void> keep = nullptr);

  Status post() override;
  ring::TaskState progress() override;
  void abort(const Status& why) override;
  const Status& status() const override;

 private:
  static ring::RingOptions with_gate(ring::RingOptions options, ring::StageGate* gate);
  void fail(const Status& why);

  std::shared_ptr<const void> keep_;
  int nodes_;
  RingStaging staging_;
  ring::Allreduce ring_;
  bool posted_ = false;       // post() was called
  bool ring_posted_ = false;  // the ring was posted (at once, or once filled with one node)
  bool ring_over_ = false;    // it returned kDone or kError
  Status failure_;
};

}  // namespace ringsync::service::execution
