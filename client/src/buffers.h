// The shared buffers a trainer allocated with rs_alloc(): the mapped regions,
// found by any pointer inside them, and how many pending requests use each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "client/src/pinned_ranges.h"
#include "common/shm.h"
#include "common/status.h"
#include "common/wire.h"

namespace ringsync::client {

class SharedBuffers {
 public:
  // Registers a region the daemon issued as `buffer_id`; `bytes` is what the user
  // asked for (the region may be larger). Returns its base address.
  void* add(std::uint32_t buffer_id, shm::Region region, std::size_t bytes);

  // Where [ptr, ptr + bytes) lives: a daemon buffer reference, or nullopt when ptr
  // is not inside any shared buffer. kInvalidArgument when the range starts inside
  // a buffer but runs past its end.
  Result<std::optional<wire::BufferRef>> find(const void* ptr, std::size_t bytes) const;

  // A pending request uses / stopped using the buffer (no-op for unknown ids).
  void pin(std::uint32_t buffer_id);
  void unpin(std::uint32_t buffer_id);

  // Takes out the buffer that starts at `ptr` and returns its id; the region is
  // unmapped. kInvalidArgument for an unknown pointer, an interior pointer or a
  // buffer still used by pending requests.
  Result<std::uint32_t> remove(void* ptr);

  std::size_t size() const;

 private:
  struct Entry {
    std::uint32_t buffer_id;
    shm::Region region;
    std::size_t bytes;
    int pending = 0;
  };
  // The entry whose [base, base + bytes) holds ptr, or end().
  std::map<std::uintptr_t, Entry>::const_iterator locate(std::uintptr_t ptr) const;

  mutable std::mutex mu_;
  PinnedRanges<Entry> ranges_;
};

}  // namespace ringsync::client
