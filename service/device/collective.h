// The data movement of one collective among the local ranks of a node whose
// buffers are GPU memory, queued on one device queue as its kind says
// (collective/kind.h: reductions on the GPU, copies device to device). The
// plan is the host path's LocalPlan with device addresses (opened IPC mappings).
#pragma once

#include <vector>

#include "common/status.h"
#include "service/device/backend.h"
#include "service/collective/plan.h"

namespace ringsync::service::device {

// kInvalidArgument unless work queued on GPU `queue_device` can read every local
// rank's GPU (`devices`, by local rank): a kernel reading a GPU it cannot reach
// would fail with an error that poisons the daemon's CUDA context for everyone.
Status check_reachable(const std::vector<int>& devices, int queue_device, DeviceBackend& backend);

// Queues the collective and waits for it; the first failure.
Status run_on_device(const collective::LocalPlan& plan, DeviceQueue& queue);

}  // namespace ringsync::service::device
