#include "service/local/buffer_table.h"

#include <string>

namespace ringsync::service::local {

Result<std::pair<std::uint32_t, std::shared_ptr<shm::Region>>> BufferTable::allocate(
    std::uint64_t bytes, std::uint64_t limit, std::string_view tag) {
  if (bytes == 0) return Status::InvalidArgument("cannot allocate a buffer of 0 bytes");
  if (regions_.size() >= kMaxBuffers)
    return Status::InvalidArgument("this client already holds " + std::to_string(kMaxBuffers) +
                                   " shared buffers; free some, or allocate fewer, larger ones");
  if (bytes > limit || total_bytes_ > limit - bytes)
    return Status::OutOfMemory("allocating " + std::to_string(bytes) + " bytes would take this " +
                               "client to " + std::to_string(total_bytes_ + bytes) +
                               " bytes of shared buffers, above the daemon's limit of " +
                               std::to_string(limit) +
                               " (--max-client-buffer-bytes); free buffers or raise the limit");
  auto region = shm::Region::create(bytes, tag);
  if (!region.ok()) return region.status();
  while (next_id_ == 0 || regions_.count(next_id_)) ++next_id_;
  const std::uint32_t id = next_id_++;
  auto shared = std::make_shared<shm::Region>(std::move(region).value());
  regions_.emplace(id, shared);
  total_bytes_ += bytes;
  return std::make_pair(id, shared);
}

bool BufferTable::release(std::uint32_t buffer_id) {
  auto it = regions_.find(buffer_id);
  if (it == regions_.end()) return false;
  total_bytes_ -= it->second->size();
  regions_.erase(it);
  return true;
}

Result<ResolvedBuffer> BufferTable::resolve(const wire::BufferRef& ref, std::uint64_t bytes,
                                            std::string_view what) const {
  if (ref.buffer_id == 0) {
    if (bytes == 0) return ResolvedBuffer{};
    return Status::InvalidArgument(std::string(what) + " buffer is missing (" +
                                   std::to_string(bytes) + " bytes needed)");
  }
  auto it = regions_.find(ref.buffer_id);
  if (it == regions_.end())
    return Status::InvalidArgument(std::string(what) + " buffer " + std::to_string(ref.buffer_id) +
                                   " is unknown or was freed");
  if (!it->second->contains(ref.offset, bytes))
    return Status::InvalidArgument(std::string(what) + " range [" + std::to_string(ref.offset) +
                                   ", +" + std::to_string(bytes) + ") is outside buffer " +
                                   std::to_string(ref.buffer_id) + " of " +
                                   std::to_string(it->second->size()) + " bytes");
  return ResolvedBuffer{it->second->data() + ref.offset, it->second};
}

void BufferTable::clear() {
  regions_.clear();
  total_bytes_ = 0;
}

}  // namespace ringsync::service::local
