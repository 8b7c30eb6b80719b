// The shared buffers one client allocated, by id. Lookups check bounds, and
// hand out shared ownership so a buffer outlives a client that disconnects
// while a collective still reads it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>

#include "common/shm.h"
#include "common/status.h"
#include "common/wire.h"

namespace ringsync::service::local {

struct ResolvedBuffer {
  std::byte* data = nullptr;  // nullptr for an empty reference
  std::shared_ptr<shm::Region> keepalive;
};

class BufferTable {
 public:
  // Buffers one client may hold at once (each is a mapping in the daemon).
  static constexpr std::size_t kMaxBuffers = 4096;

  // Creates a region of `bytes` unless that would take this client past `limit`.
  Result<std::pair<std::uint32_t, std::shared_ptr<shm::Region>>> allocate(std::uint64_t bytes,
                                                                           std::uint64_t limit,
                                                                           std::string_view tag);
  // False when the id is unknown.
  bool release(std::uint32_t buffer_id);
  // [ref.offset, ref.offset + bytes) must lie in buffer ref.buffer_id. Buffer id 0
  // means "no buffer" and is accepted only for zero bytes.
  Result<ResolvedBuffer> resolve(const wire::BufferRef& ref, std::uint64_t bytes,
                                 std::string_view what) const;

  std::uint64_t total_bytes() const { return total_bytes_; }
  std::size_t size() const { return regions_.size(); }
  void clear();

 private:
  std::map<std::uint32_t, std::shared_ptr<shm::Region>> regions_;
  std::uint32_t next_id_ = 1;
  std::uint64_t total_bytes_ = 0;
};

}  // namespace ringsync::service::local
