#include "service/device/collective.h"

#include <string>
#include <vector>

namespace ringsync::service::device {
namespace {

Status copy_unless_same(DeviceQueue& queue, void* dst, const void* src, std::size_t bytes) {
  if (dst == src || bytes == 0) return Status::Ok();
  return queue.copy_device(dst, src, bytes);
}

}  // namespace

Status check_reachable(const std::vector<int>& devices, int queue_device, DeviceBackend& backend) {
  for (std::size_t r = 0; r < devices.size(); ++r) {
    if (devices[r] < 0 || backend.reachable(queue_device, devices[r])) continue;
    return Status::InvalidArgument(
        "local rank " + std::to_string(r) + "'s buffers are on GPU " + std::to_string(devices[r]) +
        ", which GPU " + std::to_string(queue_device) +
        " (local rank 0's) cannot access directly (no peer access between them); run the "
        "ranks of one node on GPUs with peer access, or copy the tensors to one GPU first");
  }
  return Status::Ok();
}

Status spread_from_first(const local::LocalPlan& plan, std::size_t bytes, DeviceQueue& queue) {
  for (std::size_t r = 1; r < plan.ranks.size(); ++r)
    RINGSYNC_RETURN_IF_ERROR(
        copy_unless_same(queue, plan.ranks[r].recv, plan.ranks[0].recv, bytes));
  return Status::Ok();
}

// Stream order makes in place safe: every input is read by the reduction (or
// its copy) before any output other than its own slot is written.
Status run_on_device(const local::LocalPlan& plan, DeviceQueue& queue) {
  const std::size_t bytes = plan.count * dtype_size(plan.dtype);
  if (bytes == 0 || plan.ranks.empty()) return Status::Ok();
  switch (plan.kind) {
    case wire::CollectiveKind::kAllreduce: {
      std::vector<const void*> srcs;
      for (const auto& rank : plan.ranks) srcs.push_back(rank.send);
      RINGSYNC_RETURN_IF_ERROR(queue.reduce(plan.ranks[0].recv, srcs.data(), srcs.size(),
                                            plan.count, plan.dtype, plan.op));
      RINGSYNC_RETURN_IF_ERROR(spread_from_first(plan, bytes, queue));
      break;
    }
    case wire::CollectiveKind::kBroadcast: {
      const std::byte* src = plan.ranks.at(plan.root).send;
      for (const auto& rank : plan.ranks)
        RINGSYNC_RETURN_IF_ERROR(copy_unless_same(queue, rank.recv, src, bytes));
      break;
    }
    case wire::CollectiveKind::kAllgather:
      // Source s lands in slot s of every output; an in-place source already sits there.
      for (std::size_t s = 0; s < plan.ranks.size(); ++s)
        for (const auto& rank : plan.ranks)
          RINGSYNC_RETURN_IF_ERROR(
              copy_unless_same(queue, rank.recv + s * bytes, plan.ranks[s].send, bytes));
      break;
    case wire::CollectiveKind::kReduceScatter:
      // Block b of every input reduced into rank b's output (in place: block b
      // of its own input, read by this reduction only).
      for (std::size_t b = 0; b < plan.ranks.size(); ++b) {
        std::vector<const void*> srcs;
        for (const auto& rank : plan.ranks) srcs.push_back(rank.send + b * bytes);
        RINGSYNC_RETURN_IF_ERROR(queue.reduce(plan.ranks[b].recv, srcs.data(), srcs.size(),
                                              plan.count, plan.dtype, plan.op));
      }
      break;
    case wire::CollectiveKind::kAlltoall:
      for (std::size_t from = 0; from < plan.ranks.size(); ++from)
        for (std::size_t to = 0; to < plan.ranks.size(); ++to)
          RINGSYNC_RETURN_IF_ERROR(copy_unless_same(queue, plan.ranks[to].recv + from * bytes,
                                                    plan.ranks[from].send + to * bytes, bytes));
      break;
    case wire::CollectiveKind::kBarrier: return Status::Ok();
  }
  return queue.synchronize();
}

}  // namespace ringsync::service::device
