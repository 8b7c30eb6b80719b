// The bookkeeping SharedBuffers (host buffers) and DeviceRegistry (GPU
// registrations) share: entries by base address, for finding the one that
// holds a pointer, and by id, each with the count of pending requests that
// use it (a pinned entry cannot be removed). Not locked: the owner holds its
// own mutex around every call.
#pragma once

#include <cstdint>
#include <map>
#include <unordered_map>

namespace ringsync::client {

// Entry: any struct with an `int pending` member.
template <typename Entry>
struct PinnedRanges {
  std::map<std::uintptr_t, Entry> by_base;
  std::unordered_map<std::uint32_t, std::uintptr_t> base_by_id;

  // A pending request uses / stopped using the entry (no-op for unknown ids).
  void pin(std::uint32_t id) {
    if (Entry* entry = find(id)) ++entry->pending;
  }
  void unpin(std::uint32_t id) {
    if (Entry* entry = find(id); entry && entry->pending > 0) --entry->pending;
  }

 private:
  Entry* find(std::uint32_t id) {
    auto base = base_by_id.find(id);
    return base == base_by_id.end() ? nullptr : &by_base.at(base->second);
  }
};

}  // namespace ringsync::client
