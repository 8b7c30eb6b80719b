// The GPU allocations one connection registered with the daemon: found by any
// pointer inside them, checked against the driver's id of the memory there now
// (freed and reallocated memory is registered anew), and how many pending
// requests use each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "client/src/device_memory.h"
#include "client/src/pinned_ranges.h"
#include "common/status.h"

namespace ringsync::client {

class DeviceRegistry {
 public:
  // Registrations one connection holds at once (the daemon keeps one mapping each).
  static constexpr std::size_t kMaxAllocations = 4096;

  // The id `allocation` is registered under, or nullopt.
  std::optional<std::uint32_t> find(const DeviceAllocation& allocation) const;

  // Takes out the registrations overlapping `allocation` that are not it (the
  // memory they named was freed); returns their ids, for the daemon to forget.
  std::vector<std::uint32_t> take_stale(const DeviceAllocation& allocation);

  // A fresh id: never 0, never one in use.
  std::uint32_t next_id();

  // The error for a connection holding kMaxAllocations already.
  static Status too_many();

  // too_many() when the connection holds kMaxAllocations already.
  Status add(std::uint32_t id, const DeviceAllocation& allocation);

  // Takes out the registration of the allocation holding ptr and returns its id.
  // kInvalidArgument when none holds it or pending requests still use it.
  Result<std::uint32_t> remove(const void* ptr);

  // A pending request uses / stopped using a registration (no-op for unknown ids).
  void pin(std::uint32_t id);
  void unpin(std::uint32_t id);

  std::size_t size() const;

 private:
  struct Entry {
    std::uint32_t id = 0;
    DeviceAllocation allocation;
    int pending = 0;
  };

  mutable std::mutex mu_;
  PinnedRanges<Entry> ranges_;
  std::uint32_t next_id_ = 1;
};

}  // namespace ringsync::client
