#include "service/execution/staged_allreduce.h"

namespace ringsync::service::execution {

ring::RingOptions StagedAllreduce::with_gate(ring::RingOptions options, ring::StageGate* gate) {
  options.gate = gate;
  return options;
}

StagedAllreduce::StagedAllreduce(transport::Transport& transport, cuda::ChunkCopier& engine,
                                 StagedBuffers buffers, std::size_t count, DType dtype, ReduceOp op,
                                 std::size_t divisor, ring::RingOptions options,
                                 std::size_t staging_chunk_bytes, std::shared_ptr<const void> keep)
    : keep_(std::move(keep)),
      nodes_(transport.size()),
      staging_(engine, buffers, count, dtype, transport.size(), transport.rank(), staging_chunk_bytes),
      ring_(transport, buffers.host, count, dtype, op, divisor, with_gate(options, &staging_)) {}

Status StagedAllreduce::post() {
  if (posted_) return Status::InvalidArgument("staged allreduce: post() was called twice; a task runs once");
  posted_ = true;
  if (!failure_.ok()) return failure_;
  staging_.progress();  // the first copies, in the order the ring needs them
  if (nodes_ == 1) return Status::Ok();  // reduced once the input is in (progress())
  Status posted = ring_.post();
  if (!posted.ok()) {
    fail(posted);
    return posted;
  }
  ring_posted_ = true;
  return Status::Ok();
}

void StagedAllreduce::fail(const Status& why) {
  if (failure_.ok()) failure_ = why;
  staging_.abort(failure_);
  if (ring_posted_) ring_.abort(failure_);
}

ring::TaskState StagedAllreduce::progress() {
  staging_.progress();
  if (failure_.ok() && !staging_.status().ok()) fail(staging_.status());
  if (failure_.ok() && !ring_posted_ && staging_.all_filled()) {
    // One node: the whole input is here; the ring (no messages) divides for avg.
    Status posted = ring_.post();
    if (!posted.ok()) fail(posted);
    ring_posted_ = posted.ok();
  }
  if (ring_posted_ && !ring_over_) {
    const ring::TaskState state = ring_.progress();
    ring_over_ = state != ring::TaskState::kInProgress;
    if (state == ring::TaskState::kError) fail(ring_.status());
    staging_.progress();  // copies out what this round made final
  }
  if (!failure_.ok()) {
    // Over once nothing can write the buffers any more.
    const bool ring_quiet = !ring_posted_ || ring_over_;
    return ring_quiet && staging_.idle() ? ring::TaskState::kError : ring::TaskState::kInProgress;
  }
  return ring_over_ && staging_.drained() ? ring::TaskState::kDone : ring::TaskState::kInProgress;
}

void StagedAllreduce::abort(const Status& why) {
  if (ring_over_ && staging_.drained()) return;
  fail(Status(why.code(), "staged allreduce: aborted: " + why.message()));
}

const Status& StagedAllreduce::status() const { return failure_; }

}  // namespace ringsync::service::execution
