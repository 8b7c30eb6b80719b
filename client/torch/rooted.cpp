// The collectives with a root: reduce, gather and scatter, over the daemon's
// rooted kinds. Torch's rules: a reduce works in place on every rank's tensor
// and only the root's is written (ringsync leaves the others as they were); a
// gather's output list and a scatter's input list exist on the root alone (the
// other ranks pass none). CPU tensors only for now: the daemon does not stage
// these kinds through host memory for GPUs yet.
#include <ATen/ATen.h>

#include "client/torch/element_types.h"
#include "client/torch/process_group.h"
#include "client/torch/tensor_checks.h"

namespace ringsync::torch_backend {
namespace {

using WorkPtr = c10::intrusive_ptr<c10d::Work>;

void check_root(const char* call, int64_t root, int64_t root_tensor, int size) {
  TORCH_CHECK(root >= 0 && root < size, "ringsync ", call, ": root rank ", root, " is not a rank of the group (0..",
              size - 1, ")");
  TORCH_CHECK(root_tensor == 0, "ringsync ", call, ": root tensor ", root_tensor,
              " does not exist (one tensor per process)");
}

void check_host(const char* call, const at::Tensor& t) {
  TORCH_CHECK(t.device().is_cpu(), "ringsync ", call, ": the tensor is on ", t.device(), "; ringsync serves ",
              call, " on CPU tensors only for now: pass tensor.cpu() (all_reduce, broadcast, all_gather, "
              "reduce_scatter and all_to_all take CUDA tensors)");
}

// A list only the root passes: the other ranks pass none, or one empty list.
template <typename Lists>
void check_absent(const char* call, const Lists& lists, const char* what, int root) {
  TORCH_CHECK(lists.empty() || (lists.size() == 1 && lists[0].empty()), "ringsync ", call, ": only the root (rank ",
              root, ") passes ", what, "; this rank passed ", lists.size() == 1 ? lists[0].size() : lists.size(),
              " tensors");
}

// The root's list of one tensor per rank, each with `numel` elements like `like`.
void check_list(const char* call, const std::vector<at::Tensor>& list, const at::Tensor& like, int size,
                const char* what) {
  TORCH_CHECK(static_cast<int>(list.size()) == size, "ringsync ", call, ": the ", what, " has ", list.size(),
              " tensors; it needs one per rank (", size, ")");
  for (const auto& t : list) {
    check_like(call, t, like, "a tensor of the list");
    TORCH_CHECK(t.numel() == like.numel(), "ringsync ", call, ": a tensor of the ", what, " has ", t.numel(),
                " elements but it needs ", like.numel());
  }
}

}  // namespace

WorkPtr ProcessGroupRingsync::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  const char* call = "reduce";
  check_one(call, tensors, "tensor");
  const at::Tensor& t = tensors[0];
  check_tensor(call, t);
  check_host(call, t);
  check_root(call, opts.rootRank, opts.rootTensor, size_);
  const Reduction r = reduction(call, t.scalar_type(), opts.reduceOp);
  const int root = static_cast<int>(opts.rootRank);
  const bool is_root = rank_ == root;
  const at::Tensor buf = dense(t);
  return submit(c10d::OpType::REDUCE, call, {t}, {t, buf}, is_root ? copy_back(t, buf) : nullptr,
                [buf, r, root, is_root](rs_context_t* ctx, const std::string& name, auto& requests) {
                  rs_request_t* req = nullptr;
                  return track(rs_reduce_async(ctx, name.c_str(), buf.data_ptr(), is_root ? buf.data_ptr() : nullptr,
                                               count(buf), r.dtype, r.op, root, &req),
                               req, requests);
                });
}

WorkPtr ProcessGroupRingsync::gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                     const c10d::GatherOptions& opts) {
  const char* call = "gather";
  check_one(call, inputs, "input tensor");
  const at::Tensor& input = inputs[0];
  check_tensor(call, input, "the input");
  check_host(call, input);
  check_root(call, opts.rootRank, 0, size_);
  const int root = static_cast<int>(opts.rootRank);
  const bool is_root = rank_ == root;
  std::vector<at::Tensor> list;
  if (is_root) {
    check_one(call, outputs, "output list");
    list = outputs[0];
    check_list(call, list, input, size_, "output list");
  } else {
    check_absent(call, outputs, "an output list", root);
  }
  // Gathered into one flat tensor on the root, then copied into its list.
  const at::Tensor in = dense(input);
  const int64_t n = input.numel();
  const at::Tensor flat = is_root ? flat_like(input, n * size_) : at::Tensor();
  std::function<void()> copy_out;
  if (is_root)
    copy_out = [list, flat, n] {
      for (std::size_t i = 0; i < list.size(); ++i)
        list[i].copy_(flat.narrow(0, static_cast<int64_t>(i) * n, n).view(list[i].sizes()));
    };
  const Movement m = movement(input.scalar_type(), count(input));
  std::vector<at::Tensor> buffers = list;
  buffers.push_back(in);
  if (is_root) buffers.push_back(flat);
  return submit(c10d::OpType::GATHER, call, list, std::move(buffers), std::move(copy_out),
                [in, flat, m, root](rs_context_t* ctx, const std::string& name, auto& requests) {
                  rs_request_t* req = nullptr;
                  return track(rs_gather_async(ctx, name.c_str(), in.data_ptr(),
                                               flat.defined() ? flat.data_ptr() : nullptr, m.count, m.dtype, root,
                                               &req),
                               req, requests);
                });
}

WorkPtr ProcessGroupRingsync::scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                      const c10d::ScatterOptions& opts) {
  const char* call = "scatter";
  check_one(call, outputs, "output tensor");
  const at::Tensor& output = outputs[0];
  check_tensor(call, output, "the output");
  check_host(call, output);
  check_root(call, opts.rootRank, 0, size_);
  const int root = static_cast<int>(opts.rootRank);
  const bool is_root = rank_ == root;
  // The root's list into one flat tensor, block i for rank i.
  at::Tensor flat;
  if (is_root) {
    check_one(call, inputs, "input list");
    check_list(call, inputs[0], output, size_, "input list");
    const int64_t n = output.numel();
    flat = flat_like(output, n * size_);
    for (int i = 0; i < size_; ++i) flat.narrow(0, i * n, n).copy_(inputs[0][i].reshape({-1}));
  } else {
    check_absent(call, inputs, "an input list", root);
  }
  const at::Tensor out = dense(output);
  const Movement m = movement(output.scalar_type(), count(output));
  std::vector<at::Tensor> buffers = {output, out};
  if (is_root) buffers.push_back(flat);
  return submit(c10d::OpType::SCATTER, call, {output}, std::move(buffers), copy_back(output, out),
                [flat, out, m, root](rs_context_t* ctx, const std::string& name, auto& requests) {
                  rs_request_t* req = nullptr;
                  return track(rs_scatter_async(ctx, name.c_str(), flat.defined() ? flat.data_ptr() : nullptr,
                                                out.data_ptr(), m.count, m.dtype, root, &req),
                               req, requests);
                });
}

}  // namespace ringsync::torch_backend
