#include "service/ring/allreduce.h"

#include "service/ring/arguments.h"

namespace ringsync::service::ring {

RingOptions Allreduce::allgather_options(const transport::Transport& transport,
                                         RingOptions options) {
  // Wraps where there are too many steps for a tag; post() refuses that case.
  options.first_step = static_cast<std::uint16_t>(options.first_step + transport.size() - 1);
  options.input = nullptr;  // the reduced segments are in the buffer by then
  return options;
}

Allreduce::Allreduce(transport::Transport& transport, void* data, std::size_t count, DType dtype,
                     ReduceOp op, std::size_t divisor, const RingOptions& options)
    : nodes_(transport.size()),
      options_(options),
      reduce_scatter_(transport, data, count, dtype, op, divisor, options),
      allgather_(transport, data, count, dtype, allgather_options(transport, options)) {}

Status Allreduce::post() {
  refused_ = check_options("allreduce", options_, 2 * static_cast<std::size_t>(nodes_ - 1), /*reads_input=*/true);
  if (!refused_.ok()) return refused_;
  return reduce_scatter_.post();
}

TaskState Allreduce::progress() {
  if (!refused_.ok()) return TaskState::kError;
  if (!gathering_) {
    const TaskState state = reduce_scatter_.progress();
    if (state != TaskState::kDone) return state;
    // Every node's segment is reduced: pass them round the ring.
    gathering_ = true;
    if (!allgather_.post().ok()) return TaskState::kError;
  }
  return allgather_.progress();
}

void Allreduce::abort(const Status& why) {
  if (!refused_.ok()) return;
  if (gathering_) {
    allgather_.abort(why);
  } else {
    reduce_scatter_.abort(why);
  }
}

const Status& Allreduce::status() const {
  if (!refused_.ok()) return refused_;
  return gathering_ ? allgather_.status() : reduce_scatter_.status();
}

}  // namespace ringsync::service::ring
