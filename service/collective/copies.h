// The copies the kinds' layouts are made of, on the CPU and queued on a GPU.
#pragma once

#include <cstddef>
#include <cstring>

#include "common/status.h"
#include "service/collective/plan.h"
#include "service/device/backend.h"

namespace ringsync::service::collective {

// A copy that in-place buffers skip.
inline void copy_unless_same(std::byte* dst, const std::byte* src, std::size_t bytes) {
  if (dst != src && bytes > 0) std::memcpy(dst, src, bytes);
}

inline Status copy_unless_same(device::DeviceQueue& queue, void* dst, const void* src, std::size_t bytes) {
  if (dst == src || bytes == 0) return Status::Ok();
  return queue.copy_device(dst, src, bytes);
}

// Copies `bytes` from local rank 0's output to every other rank's output
// (after a result landed there).
inline Status spread_from_first(const LocalPlan& plan, std::size_t bytes, device::DeviceQueue& queue) {
  for (std::size_t r = 1; r < plan.ranks.size(); ++r)
    RINGSYNC_RETURN_IF_ERROR(copy_unless_same(queue, plan.ranks[r].recv, plan.ranks[0].recv, bytes));
  return Status::Ok();
}

}  // namespace ringsync::service::collective
