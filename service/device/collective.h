// The data movement of one collective among the local ranks of a node whose
// buffers are GPU memory, queued on one device queue: allreduce reduces the
// L inputs on the GPU into local rank 0's output and copies that to the
// others; reduce-scatter reduces each block into its rank's output; broadcast,
// allgather and alltoall copy device to device. The plan is the
// host path's LocalPlan with device addresses (opened IPC mappings).
#pragma once

#include <vector>

#include "common/status.h"
#include "service/device/backend.h"
#include "service/local/local_collective.h"

namespace ringsync::service::device {

// kInvalidArgument unless work queued on GPU `queue_device` can read every local
// rank's GPU (`devices`, by local rank): a kernel reading a GPU it cannot reach
// would fail with an error that poisons the daemon's CUDA context for everyone.
Status check_reachable(const std::vector<int>& devices, int queue_device, DeviceBackend& backend);

// Queues the collective and waits for it; the first failure.
Status run_on_device(const local::LocalPlan& plan, DeviceQueue& queue);

// Copies `bytes` from local rank 0's output to every other rank's output
// (after a result landed there).
Status spread_from_first(const local::LocalPlan& plan, std::size_t bytes, DeviceQueue& queue);

}  // namespace ringsync::service::device
