#include "client/torch/process_group.h"

#include <utility>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Utils.hpp>

#include "client/torch/element_types.h"
#include "client/torch/tensor_checks.h"
#include "client/torch/work.h"

namespace ringsync::torch_backend {
namespace {

using c10d::OpType;
using WorkPtr = c10::intrusive_ptr<c10d::Work>;

[[noreturn]] void unsupported(const char* call, const char* instead) {
  TORCH_CHECK(false, "ringsync ", call, ": not supported by the ringsync backend (", instead,
              "); supported: broadcast, all_reduce, all_reduce_coalesced, all_gather, "
              "_all_gather_base, reduce_scatter, _reduce_scatter_base, all_to_all, "
              "all_to_all_single, barrier, reduce, gather, scatter");
}


// Submits one reduce-scatter of `in` (world size blocks) into `out`: both
// reduce_scatter and _reduce_scatter_base end here.
auto issue_reduce_scatter(at::Tensor in, at::Tensor out, Reduction r) {
  return [in, out, r](rs_context_t* ctx, const std::string& name, auto& requests) {
    rs_request_t* req = nullptr;
    return track(rs_reduce_scatter_async(ctx, name.c_str(), in.data_ptr(), out.data_ptr(), count(out), r.dtype,
                                         r.op, &req),
                 req, requests);
  };
}
}  // namespace

ProcessGroupRingsync::ProcessGroupRingsync(rs_context_t* ctx, int rank, int size,
                                           std::string group_id, std::function<void()> release)
    : c10d::ProcessGroup(rank, size),
      ctx_(ctx),
      prefix_("torch.pg" + group_id + "."),
      release_(std::move(release)) {
  TORCH_CHECK(ctx != nullptr, "ringsync backend: no connection to the daemon; call "
              "ringsync.init() first");
  const int rs_rank_now = rs_rank(ctx), rs_size_now = rs_size(ctx);
  TORCH_CHECK(rank == rs_rank_now && size == rs_size_now, "ringsync backend: torch says rank ",
              rank, " of ", size, " but the ringsync job says rank ", rs_rank_now, " of ",
              rs_size_now, "; the group must span every rank of the ringsync job, in its order "
              "(RANK and WORLD_SIZE must match RINGSYNC_RANK and RINGSYNC_SIZE)");
}

ProcessGroupRingsync::~ProcessGroupRingsync() {
  {
    std::lock_guard<std::mutex> lock(submit_mutex_);
    closed_ = true;
  }
  // The destructor may run holding the GIL, which a future's Python callback on the
  // queue's thread may need: let the thread drain on its own. Requests outlive the
  // connection, so the connection may be released before they complete.
  queue_.detach();
  release_once();
}

std::size_t ProcessGroupRingsync::close(std::chrono::milliseconds drain) {
  {
    std::lock_guard<std::mutex> lock(submit_mutex_);
    closed_ = true;
  }
  const std::size_t abandoned = queue_.close(drain);
  release_once();
  return abandoned;
}

void ProcessGroupRingsync::release_once() {
  std::function<void()> release;
  {
    std::lock_guard<std::mutex> lock(release_mutex_);
    release.swap(release_);
  }
  if (release) release();
}

WorkPtr ProcessGroupRingsync::submit(OpType type, const char* call,
                                     std::vector<at::Tensor> outputs,
                                     std::vector<at::Tensor> buffers,
                                     std::function<void()> copy_out, const Issue& issue) {
  // One lock around naming, submitting and queueing: the names follow the order of
  // the calls, and the queue waits in the order of the submissions.
  std::lock_guard<std::mutex> lock(submit_mutex_);
  TORCH_CHECK(!closed_, "ringsync ", call, ": the process group is closed (destroyed, or "
              "ringsync.torch closed it at exit); create a new one");
  const std::string name = prefix_ + std::to_string(sequence_++);
  std::vector<rs_request_t*> requests;
  const Outcome submitted = issue(ctx_, name, requests);
  auto work = c10::make_intrusive<RingsyncWork>(type, call, name, std::move(outputs),
                                                std::move(buffers), std::move(copy_out));
  // A failed submission fails the Work (wait() raises), after the requests of the
  // call's other parts, if any, have completed.
  queue_.push(std::move(requests), [work, submitted](const Outcome& outcome) {
    work->complete(submitted.ok() ? outcome : submitted);
  });
  return work;
}

WorkPtr ProcessGroupRingsync::broadcast(std::vector<at::Tensor>& tensors,
                                        const c10d::BroadcastOptions& opts) {
  const char* call = "broadcast";
  check_one(call, tensors, "tensor");
  const at::Tensor& t = tensors[0];
  check_tensor(call, t);
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < size_, "ringsync broadcast: root rank ",
              opts.rootRank, " is not a rank of the group (0..", size_ - 1, ")");
  TORCH_CHECK(opts.rootTensor == 0, "ringsync broadcast: root tensor ", opts.rootTensor,
              " does not exist (one tensor per process)");
  const at::Tensor buf = dense(t);
  const Movement m = movement(t.scalar_type(), count(t));
  const int root = static_cast<int>(opts.rootRank);
  return submit(OpType::BROADCAST, call, {t}, {t, buf}, copy_back(t, buf),
                [buf, m, root](rs_context_t* ctx, const std::string& name, auto& requests) {
                  rs_request_t* req = nullptr;
                  return track(rs_broadcast_async(ctx, name.c_str(), buf.data_ptr(),
                                                  buf.data_ptr(), m.count, m.dtype, root, &req),
                               req, requests);
                });
}

WorkPtr ProcessGroupRingsync::allreduce(std::vector<at::Tensor>& tensors,
                                        const c10d::AllreduceOptions& opts) {
  const char* call = "allreduce";
  check_one(call, tensors, "tensor");
  const at::Tensor& t = tensors[0];
  check_tensor(call, t);
  const Reduction r = reduction(call, t.scalar_type(), opts.reduceOp);
  const at::Tensor buf = dense(t);
  return submit(OpType::ALLREDUCE, call, {t}, {t, buf}, copy_back(t, buf),
                [buf, r](rs_context_t* ctx, const std::string& name, auto& requests) {
                  rs_request_t* req = nullptr;
                  return track(rs_allreduce_async(ctx, name.c_str(), buf.data_ptr(),
                                                  buf.data_ptr(), count(buf), r.dtype, r.op,
                                                  &req),
                               req, requests);
                });
}

WorkPtr ProcessGroupRingsync::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                  const c10d::AllreduceCoalescedOptions& opts) {
  const char* call = "allreduce_coalesced";
  TORCH_CHECK(!tensors.empty(), "ringsync allreduce_coalesced: no tensors");
  // One request per tensor, all in flight at once: the daemon batches them itself,
  // and no tensor is copied into a flat buffer and back.
  std::vector<at::Tensor> staged;
  std::vector<Reduction> reductions;
  std::vector<std::function<void()>> copies;
  for (const auto& t : tensors) {
    check_tensor(call, t);
    reductions.push_back(reduction(call, t.scalar_type(), opts.reduceOp));
    staged.push_back(dense(t));
    if (auto copy = copy_back(t, staged.back())) copies.push_back(std::move(copy));
  }
  std::function<void()> copy_out;
  if (!copies.empty()) copy_out = [copies] { for (const auto& c : copies) c(); };
  std::vector<at::Tensor> buffers = tensors;
  buffers.insert(buffers.end(), staged.begin(), staged.end());
  return submit(OpType::ALLREDUCE_COALESCED, call, tensors, std::move(buffers),
                std::move(copy_out),
                [staged, reductions](rs_context_t* ctx, const std::string& name, auto& requests) {
                  for (std::size_t i = 0; i < staged.size(); ++i) {
                    const std::string part = name + "." + std::to_string(i);
                    rs_request_t* req = nullptr;
                    const Outcome o = track(
                        rs_allreduce_async(ctx, part.c_str(), staged[i].data_ptr(),
                                           staged[i].data_ptr(), count(staged[i]),
                                           reductions[i].dtype, reductions[i].op, &req),
                        req, requests);
                    if (!o.ok()) return o;
                  }
                  return Outcome{};
                });
}

WorkPtr ProcessGroupRingsync::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::AllgatherOptions&) {
  const char* call = "allgather";
  check_one(call, inputs, "input tensor");
  check_one(call, outputs, "output list");
  const at::Tensor& input = inputs[0];
  check_tensor(call, input, "the input");
  const auto& list = outputs[0];
  TORCH_CHECK(static_cast<int>(list.size()) == size_, "ringsync allgather: the output list has ",
              list.size(), " tensors; it needs one per rank (", size_, ")");
  for (const auto& out : list) {
    check_like(call, out, input, "an output tensor");
    TORCH_CHECK(out.numel() == input.numel(), "ringsync allgather: an output tensor has ",
                out.numel(), " elements but the input has ", input.numel());
  }
  // Gathered into one flat tensor, then copied into the list.
  const at::Tensor in = dense(input);
  const at::Tensor flat = flat_like(input, input.numel() * size_);
  const int64_t n = input.numel();
  auto copy_out = [list, flat, n] {
    for (std::size_t i = 0; i < list.size(); ++i)
      list[i].copy_(flat.narrow(0, static_cast<int64_t>(i) * n, n).view(list[i].sizes()));
  };
  const Movement m = movement(input.scalar_type(), count(input));
  std::vector<at::Tensor> buffers = list;
  buffers.insert(buffers.end(), {in, flat});
  return submit(OpType::ALLGATHER, call, list, std::move(buffers), copy_out,
                [in, flat, m](rs_context_t* ctx, const std::string& name, auto& requests) {
                  rs_request_t* req = nullptr;
                  return track(rs_allgather_async(ctx, name.c_str(), in.data_ptr(),
                                                  flat.data_ptr(), m.count, m.dtype, &req),
                               req, requests);
                });
}

WorkPtr ProcessGroupRingsync::_allgather_base(at::Tensor& output, at::Tensor& input,
                                              const c10d::AllgatherOptions&) {
  const char* call = "_allgather_base";
  check_tensor(call, input, "the input");
  check_like(call, output, input, "the output");
  TORCH_CHECK(output.numel() == input.numel() * size_, "ringsync _allgather_base: the output "
              "has ", output.numel(), " elements; it needs world size (", size_, ") times the "
              "input's ", input.numel());
  const at::Tensor in = dense(input), out = dense(output);
  const Movement m = movement(input.scalar_type(), count(input));
  return submit(OpType::_ALLGATHER_BASE, call, {output}, {output, in, out},
                copy_back(output, out),
                [in, out, m](rs_context_t* ctx, const std::string& name, auto& requests) {
                  rs_request_t* req = nullptr;
                  return track(rs_allgather_async(ctx, name.c_str(), in.data_ptr(),
                                                  out.data_ptr(), m.count, m.dtype, &req),
                               req, requests);
                });
}

WorkPtr ProcessGroupRingsync::reduce_scatter(std::vector<at::Tensor>& outputs,
                                             std::vector<std::vector<at::Tensor>>& inputs,
                                             const c10d::ReduceScatterOptions& opts) {
  const char* call = "reduce_scatter";
  check_one(call, outputs, "output tensor");
  check_one(call, inputs, "input list");
  const at::Tensor& output = outputs[0];
  check_tensor(call, output, "the output");
  const auto& list = inputs[0];
  TORCH_CHECK(static_cast<int>(list.size()) == size_, "ringsync reduce_scatter: the input list "
              "has ", list.size(), " tensors; it needs one per rank (", size_, ")");
  for (const auto& in : list) {
    check_like(call, in, output, "an input tensor");
    TORCH_CHECK(in.numel() == output.numel(), "ringsync reduce_scatter: an input tensor has ",
                in.numel(), " elements but the output has ", output.numel());
  }
  const Reduction r = reduction(call, output.scalar_type(), opts.reduceOp);
  // The list into one flat tensor, block i for rank i.
  const int64_t n = output.numel();
  const at::Tensor flat = flat_like(output, n * size_);
  for (int i = 0; i < size_; ++i) flat.narrow(0, i * n, n).copy_(list[i].reshape({-1}));
  const at::Tensor out = dense(output);
  return submit(OpType::REDUCE_SCATTER, call, {output}, {output, out, flat}, copy_back(output, out),
                issue_reduce_scatter(flat, out, r));
}

WorkPtr ProcessGroupRingsync::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                   const c10d::ReduceScatterOptions& opts) {
  const char* call = "_reduce_scatter_base";
  check_tensor(call, input, "the input");
  check_like(call, output, input, "the output");
  TORCH_CHECK(input.numel() == output.numel() * size_, "ringsync _reduce_scatter_base: the "
              "input has ", input.numel(), " elements; it needs world size (", size_,
              ") times the output's ", output.numel());
  const Reduction r = reduction(call, input.scalar_type(), opts.reduceOp);
  const at::Tensor in = dense(input), out = dense(output);
  return submit(OpType::_REDUCE_SCATTER_BASE, call, {output}, {output, in, out}, copy_back(output, out),
                issue_reduce_scatter(in, out, r));
}

WorkPtr ProcessGroupRingsync::alltoall_base(at::Tensor& output, at::Tensor& input,
                                            std::vector<int64_t>& output_splits,
                                            std::vector<int64_t>& input_splits,
                                            const c10d::AllToAllOptions&) {
  const char* call = "alltoall_base";
  check_tensor(call, input, "the input");
  check_like(call, output, input, "the output");
  c10d::checkSplitSizes(input_splits, input, size_);
  c10d::checkSplitSizes(output_splits, output, size_);
  // Block j: the rows of split j along dim 0 (equal splits when none are given).
  auto blocks = [this](const at::Tensor& t, const std::vector<int64_t>& splits) {
    std::vector<at::Tensor> pieces;
    int64_t row = 0;
    for (int j = 0; j < size_; ++j) {
      const int64_t rows = splits.empty() ? t.size(0) / size_ : splits[j];
      pieces.push_back(t.narrow(0, row, rows));
      row += rows;
    }
    return pieces;
  };
  return padded_alltoall(OpType::ALLTOALL_BASE, call, blocks(input, input_splits),
                         blocks(output, output_splits), {output});
}

WorkPtr ProcessGroupRingsync::alltoall(std::vector<at::Tensor>& outputs,
                                       std::vector<at::Tensor>& inputs,
                                       const c10d::AllToAllOptions&) {
  const char* call = "alltoall";
  TORCH_CHECK(static_cast<int>(inputs.size()) == size_ &&
                  static_cast<int>(outputs.size()) == size_,
              "ringsync alltoall: needs one input and one output tensor per rank (", size_,
              "), got ", inputs.size(), " and ", outputs.size());
  check_tensor(call, inputs[0], "an input tensor");
  for (const auto& t : inputs) check_like(call, t, inputs[0], "an input tensor");
  for (const auto& t : outputs) check_like(call, t, inputs[0], "an output tensor");
  return padded_alltoall(OpType::ALLTOALL, call, inputs, outputs, outputs);
}

WorkPtr ProcessGroupRingsync::barrier(const c10d::BarrierOptions&) {
  return submit(OpType::BARRIER, "barrier", {}, {}, nullptr,
                [](rs_context_t* ctx, const std::string& name, auto& requests) {
                  rs_request_t* req = nullptr;
                  return track(rs_barrier_async(ctx, name.c_str(), &req), req, requests);
                });
}

WorkPtr ProcessGroupRingsync::allgather_coalesced(std::vector<std::vector<at::Tensor>>&,
                                                  std::vector<at::Tensor>&,
                                                  const c10d::AllgatherOptions&) {
  unsupported("allgather_coalesced", "call all_gather once per tensor");
}

WorkPtr ProcessGroupRingsync::send(std::vector<at::Tensor>&, int, int) {
  unsupported("send", "the daemon has no point-to-point messages");
}

WorkPtr ProcessGroupRingsync::recv(std::vector<at::Tensor>&, int, int) {
  unsupported("recv", "the daemon has no point-to-point messages");
}

WorkPtr ProcessGroupRingsync::recvAnysource(std::vector<at::Tensor>&, int) {
  unsupported("recv", "the daemon has no point-to-point messages");
}

}  // namespace ringsync::torch_backend
