#include "client/src/buffers.h"

#include <sstream>

#include "client/src/address_text.h"

namespace ringsync::client {

void* SharedBuffers::add(std::uint32_t buffer_id, shm::Region region, std::size_t bytes) {
  void* base = region.data();
  std::lock_guard lock(mu_);
  const auto key = reinterpret_cast<std::uintptr_t>(base);
  ranges_.by_base.emplace(key, Entry{buffer_id, std::move(region), bytes});
  ranges_.base_by_id[buffer_id] = key;
  return base;
}

std::map<std::uintptr_t, SharedBuffers::Entry>::const_iterator SharedBuffers::locate(
    std::uintptr_t ptr) const {
  auto it = ranges_.by_base.upper_bound(ptr);
  if (it == ranges_.by_base.begin()) return ranges_.by_base.end();
  --it;
  if (ptr - it->first >= it->second.bytes) return ranges_.by_base.end();
  return it;
}

Result<std::optional<wire::BufferRef>> SharedBuffers::find(const void* ptr,
                                                           std::size_t bytes) const {
  const auto p = reinterpret_cast<std::uintptr_t>(ptr);
  std::lock_guard lock(mu_);
  auto it = locate(p);
  if (it == ranges_.by_base.end()) return std::optional<wire::BufferRef>();
  const std::size_t offset = p - it->first;
  if (bytes > it->second.bytes - offset)
    return Status::InvalidArgument(std::to_string(bytes) + " bytes at " + address_text(p) +
                                   " run past the end of the shared buffer at " +
                                   address_text(it->first) + " (" + std::to_string(it->second.bytes) +
                                   " bytes); keep every tensor inside one buffer from rs_alloc()");
  return std::optional<wire::BufferRef>(wire::BufferRef{it->second.buffer_id, offset});
}

void SharedBuffers::pin(std::uint32_t buffer_id) {
  std::lock_guard lock(mu_);
  ranges_.pin(buffer_id);
}

void SharedBuffers::unpin(std::uint32_t buffer_id) {
  std::lock_guard lock(mu_);
  ranges_.unpin(buffer_id);
}

Result<std::uint32_t> SharedBuffers::remove(void* ptr) {
  const auto p = reinterpret_cast<std::uintptr_t>(ptr);
  shm::Region unmap_outside_lock;
  std::uint32_t id = 0;
  {
    std::lock_guard lock(mu_);
    auto it = locate(p);
    if (it == ranges_.by_base.end())
      return Status::InvalidArgument(address_text(p) +
                                     " is not a buffer from rs_alloc() on this context (or was "
                                     "freed already)");
    if (it->first != p)
      return Status::InvalidArgument(address_text(p) + " points inside the shared buffer at " +
                                     address_text(it->first) + "; pass the pointer rs_alloc() returned");
    if (it->second.pending > 0)
      return Status::InvalidArgument(
          "the shared buffer at " + address_text(p) + " is used by " +
          std::to_string(it->second.pending) +
          " pending request(s); wait for them (rs_wait) before freeing it");
    auto node = ranges_.by_base.extract(it);
    id = node.mapped().buffer_id;
    ranges_.base_by_id.erase(id);
    unmap_outside_lock = std::move(node.mapped().region);
  }
  return id;
}

std::size_t SharedBuffers::size() const {
  std::lock_guard lock(mu_);
  return ranges_.by_base.size();
}

}  // namespace ringsync::client
