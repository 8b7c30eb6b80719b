// All-to-all with blocks of different sizes over the daemon's all-to-all, which
// moves blocks of one size: the ranks agree on the largest block (an allreduce of
// one number, MAX), each rank pads its blocks to it, and unpads what it receives.
// Every all-to-all takes this path, also one whose blocks are all equal: whether
// they are is known only locally, and all ranks must submit the same collectives.
// When a rank's blocks already are the agreed size and lie in order in one dense
// tensor, nothing is copied.
#include <algorithm>
#include <utility>

#include <ATen/ATen.h>

#include "client/torch/element_types.h"
#include "client/torch/process_group.h"

namespace ringsync::torch_backend {
namespace {

// `pieces` as one dense run of equal blocks of `block` elements: the tensor whose
// memory they are, in order; undefined when they are not.
at::Tensor contiguous_run(const std::vector<at::Tensor>& pieces, int64_t block) {
  if (pieces.empty() || !pieces[0].is_contiguous()) return at::Tensor();
  const auto* base = static_cast<const char*>(pieces[0].data_ptr());
  const auto bytes = static_cast<int64_t>(pieces[0].element_size()) * block;
  for (std::size_t j = 0; j < pieces.size(); ++j) {
    const auto& p = pieces[j];
    if (p.numel() != block || !p.is_contiguous() ||
        static_cast<const char*>(p.data_ptr()) != base + static_cast<int64_t>(j) * bytes)
      return at::Tensor();
  }
  if (block == 0) return at::Tensor();
  // A flat view over all blocks, sharing their storage.
  return pieces[0].reshape({-1}).as_strided({block * static_cast<int64_t>(pieces.size())}, {1});
}

}  // namespace

int64_t ProcessGroupRingsync::agree_on_max(const char* call, int64_t local) {
  const at::Tensor value = at::full({1}, local, at::kLong);
  auto work = submit(c10d::OpType::ALLREDUCE, call, {value}, {value}, nullptr,
                     [value](rs_context_t* ctx, const std::string& name, auto& requests) {
                       rs_request_t* req = nullptr;
                       const rs_status_t status = rs_allreduce_async(
                           ctx, name.c_str(), value.data_ptr(), value.data_ptr(), 1, RS_I64,
                           RS_MAX, &req);
                       if (status != RS_SUCCESS) return Outcome{status, rs_last_error()};
                       requests.push_back(req);
                       return Outcome{};
                     });
  work->wait();  // raises the daemon's error; torch's bindings released the GIL
  return value.item<int64_t>();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRingsync::padded_alltoall(
    c10d::OpType type, const char* call, std::vector<at::Tensor> sends,
    std::vector<at::Tensor> receives, std::vector<at::Tensor> outputs) {
  int64_t largest = 0;
  for (const auto& p : sends) largest = std::max(largest, p.numel());
  for (const auto& p : receives) largest = std::max(largest, p.numel());
  const int64_t block = agree_on_max(call, largest);

  const at::Tensor& like = sends[0];
  at::Tensor in = contiguous_run(sends, block);
  if (!in.defined()) {
    in = at::zeros({block * size_}, like.options().memory_format(c10::MemoryFormat::Contiguous));
    for (int j = 0; j < size_; ++j)
      in.narrow(0, j * block, sends[j].numel()).copy_(sends[j].reshape({-1}));
  }
  at::Tensor out = contiguous_run(receives, block);
  std::function<void()> copy_out;
  if (!out.defined()) {
    out = at::empty({block * size_}, like.options().memory_format(c10::MemoryFormat::Contiguous));
    copy_out = [receives, out, block] {
      for (std::size_t j = 0; j < receives.size(); ++j) {
        const auto& r = receives[j];
        r.copy_(out.narrow(0, static_cast<int64_t>(j) * block, r.numel()).view(r.sizes()));
      }
    };
  }
  // Not in place at the daemon: an input sharing the output's memory is copied first.
  if (in.numel() > 0 && in.storage().is_alias_of(out.storage())) in = in.clone();
  const Movement m = movement(like.scalar_type(), static_cast<std::size_t>(block));
  std::vector<at::Tensor> buffers = outputs;
  buffers.insert(buffers.end(), {in, out});
  return submit(type, call, std::move(outputs), std::move(buffers), std::move(copy_out),
                [in, out, m](rs_context_t* ctx, const std::string& name, auto& requests) {
                  rs_request_t* req = nullptr;
                  const rs_status_t status = rs_alltoall_async(
                      ctx, name.c_str(), in.data_ptr(), out.data_ptr(), m.count, m.dtype, &req);
                  if (status != RS_SUCCESS) return Outcome{status, rs_last_error()};
                  requests.push_back(req);
                  return Outcome{};
                });
}

}  // namespace ringsync::torch_backend
