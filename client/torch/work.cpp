#include "client/torch/work.h"

#include <stdexcept>
#include <utility>

namespace ringsync::torch_backend {
namespace {

// "ringsync allreduce (torch.pg0.12) failed: mismatch: local ranks disagree on ..."
std::exception_ptr error_of(const std::string& call, const std::string& name,
                            const Outcome& outcome) {
  std::string message = "ringsync " + call + " (collective '" + name + "') failed: " +
                        rs_status_string(outcome.status);
  if (!outcome.message.empty()) message += ": " + outcome.message;
  return std::make_exception_ptr(std::runtime_error(message));
}

}  // namespace

RingsyncWork::RingsyncWork(c10d::OpType type, std::string call, std::string name,
                           std::vector<at::Tensor> outputs, std::vector<at::Tensor> buffers,
                           std::function<void()> copy_out)
    : c10d::Work(-1, type),
      call_(std::move(call)),
      name_(std::move(name)),
      outputs_(std::move(outputs)),
      buffers_(std::move(buffers)),
      copy_out_(std::move(copy_out)),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()))) {}

void RingsyncWork::complete(const Outcome& outcome) {
  std::exception_ptr error;
  if (!outcome.ok()) {
    error = error_of(call_, name_, outcome);
  } else if (copy_out_) {
    try {
      copy_out_();
    } catch (...) {
      error = std::current_exception();
    }
  }
  // Success releases the staging tensors; a failure keeps them, since the daemon
  // may not be done with an abandoned request's buffers.
  if (!error) buffers_.clear();
  copy_out_ = nullptr;
  // The Work first (wait() returns), then the future, whose callbacks run here.
  finish(error);
  if (error) future_->setError(error);
  else future_->markCompleted(c10::IValue(outputs_));
}

std::vector<at::Tensor> RingsyncWork::result() { return outputs_; }

c10::intrusive_ptr<c10::ivalue::Future> RingsyncWork::getFuture() { return future_; }

}  // namespace ringsync::torch_backend
