// ProcessGroupRingsync: torch.distributed's "ringsync" backend, a c10d::ProcessGroup
// whose collectives are libringsync's, on the connection the Python package opened
// (a process may hold one connection per rank: ringsync.init()'s).
//
// The group spans every rank of the ringsync job (the daemons know no subgroups),
// with torch's rank r being ringsync's global rank r. Each collective is submitted
// at once from the calling thread, named "torch.pg<group>.<sequence number>" (torch
// makes every rank call a group's collectives in the same order, so the names agree,
// and a rank that called another collective shows up as the daemon's mismatch), and
// completed by the group's CompletionQueue thread. Tensors on the CPU or a CUDA
// device (the library takes device pointers and synchronises the device itself).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "client/torch/completion_queue.h"
#include "ringsync/ringsync.h"

namespace ringsync::torch_backend {

class ProcessGroupRingsync : public c10d::ProcessGroup {
 public:
  // ctx: the live connection; rank and size: torch's, checked against it.
  // group_id: torch's name of the group, the same on every rank. `release` is
  // called once when the group stops using ctx (close() or destruction).
  ProcessGroupRingsync(rs_context_t* ctx, int rank, int size, std::string group_id,
                       std::function<void()> release);
  ~ProcessGroupRingsync() override;

  const std::string getBackendName() const override { return "ringsync"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  // Not offered by the daemon: each raises a RuntimeError naming the call.
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                               int tag) override;

  // Stops taking collectives, gives those pending up to `drain` to finish (the
  // rest fail with "closed"), and releases the connection. Returns how many were
  // abandoned. Idempotent. Must not be called holding the GIL (see CompletionQueue).
  std::size_t close(std::chrono::milliseconds drain = CompletionQueue::kDefaultDrain);

  // How many collectives this group has submitted (the next sequence number).
  std::uint64_t submitted() const { return sequence_.load(); }

 private:
  // Submits one collective's requests on ctx under the given name; on a failed
  // submission returns its status with rs_last_error(). `requests` receives
  // every request submitted, also those before a failure.
  using Issue = std::function<Outcome(rs_context_t* ctx, const std::string& name,
                                      std::vector<rs_request_t*>& requests)>;

  c10::intrusive_ptr<c10d::Work> submit(c10d::OpType type, const char* call,
                                        std::vector<at::Tensor> outputs,
                                        std::vector<at::Tensor> buffers,
                                        std::function<void()> copy_out, const Issue& issue);
  void release_once();

  // All-to-all of blocks of any sizes (padded_alltoall.cpp): sends[j] goes to rank j,
  // receives[j] comes from rank j. The ranks first agree on the largest block, then
  // the daemon moves blocks of that size.
  c10::intrusive_ptr<c10d::Work> padded_alltoall(c10d::OpType type, const char* call,
                                                 std::vector<at::Tensor> sends,
                                                 std::vector<at::Tensor> receives,
                                                 std::vector<at::Tensor> outputs);
  // The largest `local` of every rank: a collective of its own, waited for here.
  int64_t agree_on_max(const char* call, int64_t local);

  rs_context_t* const ctx_;
  const std::string prefix_;  // "torch.pg<group>."
  std::mutex submit_mutex_;   // orders names and submissions; guards closed_
  bool closed_ = false;
  std::atomic<std::uint64_t> sequence_{0};
  CompletionQueue queue_;
  std::mutex release_mutex_;
  std::function<void()> release_;
};

}  // namespace ringsync::torch_backend
