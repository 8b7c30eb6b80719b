// The checks and staging every collective of the torch backend shares: one
// tensor per process, dense strided CPU or CUDA tensors, matching dtypes and
// devices, and contiguous copies whose results go back to the caller's tensor.
#pragma once

#include <functional>
#include <vector>

#include <ATen/ATen.h>

#include "client/torch/completion_queue.h"
#include "client/torch/element_types.h"
#include "ringsync/ringsync.h"

namespace ringsync::torch_backend {

// Records a submission: the request on success, else the failure and its message
// (read now, before this thread calls the library again). `request` by reference:
// it is read after the submission that is the other argument has written it.
inline Outcome track(rs_status_t status, rs_request_t* const& request, std::vector<rs_request_t*>& requests) {
  if (status != RS_SUCCESS) return Outcome{status, rs_last_error()};
  requests.push_back(request);
  return Outcome{};
}

inline void check_tensor(const char* call, const at::Tensor& t, const char* what = "the tensor") {
  TORCH_CHECK(t.defined(), "ringsync ", call, ": ", what, " is undefined");
  TORCH_CHECK(t.layout() == c10::kStrided, "ringsync ", call, ": ", what, " is ", t.layout(),
              "; only dense (strided) tensors are supported");
  TORCH_CHECK(t.device().is_cpu() || t.device().is_cuda(), "ringsync ", call, ": ", what,
              " is on ", t.device(), "; the ringsync backend takes CPU and CUDA tensors");
}

template <typename List>
void check_one(const char* call, const List& tensors, const char* what) {
  TORCH_CHECK(tensors.size() == 1, "ringsync ", call, ": takes one ", what,
              " per process, got ", tensors.size(),
              " (the ringsync backend runs one process per device)");
}

inline void check_like(const char* call, const at::Tensor& t, const at::Tensor& like, const char* what) {
  check_tensor(call, t, what);
  TORCH_CHECK(t.scalar_type() == like.scalar_type(), "ringsync ", call, ": ", what, " is ",
              dtype_name(t.scalar_type()), " but the input is ", dtype_name(like.scalar_type()));
  TORCH_CHECK(t.device() == like.device(), "ringsync ", call, ": ", what, " is on ", t.device(),
              " but the input is on ", like.device());
}

// A contiguous tensor with t's data: t itself, or a copy whose result the caller
// copies back (see copy_back).
inline at::Tensor dense(const at::Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }

inline std::function<void()> copy_back(const at::Tensor& target, const at::Tensor& staged) {
  if (staged.is_same(target)) return nullptr;
  return [target, staged] { target.copy_(staged); };
}

// An empty contiguous tensor of `numel` elements like `like` (dtype, device).
inline at::Tensor flat_like(const at::Tensor& like, int64_t numel) {
  return at::empty({numel}, like.options().memory_format(c10::MemoryFormat::Contiguous));
}

inline size_t count(const at::Tensor& t) { return static_cast<size_t>(t.numel()); }

}  // namespace ringsync::torch_backend
