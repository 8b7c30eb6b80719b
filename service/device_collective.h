// The data movement of one collective among the local ranks of a node whose
// buffers are GPU memory, queued on one device queue: allreduce reduces the
// L inputs on the GPU into local rank 0's output and copies that to the
// others; broadcast and allgather copy device to device. The plan is the
// host path's LocalPlan with device addresses (opened IPC mappings).
#pragma once

#include "common/status.h"
#include "service/device_backend.h"
#include "service/local_collective.h"

namespace ringsync::service {

// Queues the collective and waits for it; the first failure.
Status run_on_device(const LocalPlan& plan, DeviceQueue& queue);

// Copies `bytes` from local rank 0's output to every other rank's output
// (after a result landed there).
Status spread_from_first(const LocalPlan& plan, std::size_t bytes, DeviceQueue& queue);

}  // namespace ringsync::service
