#include "service/device/collective.h"

#include <string>
#include <vector>

#include "service/collective/kind.h"

namespace ringsync::service::device {

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

// Stream order makes in place safe: every input is read by the reduction (or
// its copy) before any output other than its own slot is written.
Status run_on_device(const collective::LocalPlan& plan, DeviceQueue& queue) {
  const std::size_t bytes = plan.count * dtype_size(plan.dtype);
  if (bytes == 0 || plan.ranks.empty()) return Status::Ok();
  RINGSYNC_RETURN_IF_ERROR(collective::kind_of(plan.kind).on_device(plan, bytes, queue));
  return queue.synchronize();
}

}  // namespace ringsync::service::device
