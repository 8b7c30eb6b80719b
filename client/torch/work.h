// One collective of the ringsync process group as torch sees it: a c10d::Work
// that the completion queue's thread completes, with a Future for DDP's comm
// hooks. It holds every tensor the daemon reads or writes until then.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Work.hpp>

#include "client/torch/completion_queue.h"

namespace ringsync::torch_backend {

class RingsyncWork : public c10d::Work {
 public:
  // `call`: what torch called ("allreduce", ...) and `name`: the collective's
  // name at the daemon, both for error messages. `outputs`: result() and the
  // future's value. `buffers`: every tensor the daemon may touch (kept alive).
  // `copy_out`: run on success before completion (results from a staging
  // tensor into the caller's tensors); may be empty.
  RingsyncWork(c10d::OpType type, std::string call, std::string name,
               std::vector<at::Tensor> outputs, std::vector<at::Tensor> buffers,
               std::function<void()> copy_out);

  // Called once, on the completion queue's thread (or the submitting thread when
  // the submission itself failed).
  void complete(const Outcome& outcome);

  std::vector<at::Tensor> result() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

 private:
  const std::string call_;
  const std::string name_;
  std::vector<at::Tensor> outputs_;
  std::vector<at::Tensor> buffers_;
  std::function<void()> copy_out_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace ringsync::torch_backend
