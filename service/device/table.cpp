#include "service/device/table.h"

#include <string>

namespace ringsync::service::device {

Status DeviceTable::reserve(const wire::RegisterDevice& request) {
  const std::string what = "GPU allocation " + std::to_string(request.allocation_id);
  if (request.allocation_id == 0)
    return Status::InvalidArgument("GPU allocation id 0 is reserved; number allocations from 1");
  if (request.bytes == 0) return Status::InvalidArgument(what + " has 0 bytes");
  if (request.device < 0)
    return Status::InvalidArgument(what + " names device " + std::to_string(request.device));
  auto it = entries_.find(request.allocation_id);
  if (it != entries_.end())
    return Status::InvalidArgument(what + " is registered already" +
                                   (it->second ? "" : " (its mapping is being opened)") +
                                   "; unregister it first or use a new id");
  if (entries_.size() >= kMaxAllocations)
    return Status::InvalidArgument("this client already registered " +
                                   std::to_string(kMaxAllocations) +
                                   " GPU allocations; unregister some first");
  entries_.emplace(request.allocation_id, nullptr);
  return Status::Ok();
}

Status DeviceTable::check_mapped_size(const wire::RegisterDevice& request,
                                      std::uint64_t real_bytes) {
  if (request.bytes <= real_bytes) return Status::Ok();
  return Status::InvalidArgument("GPU allocation " + std::to_string(request.allocation_id) +
                                 " was registered as " + std::to_string(request.bytes) +
                                 " bytes, but the allocation behind its IPC handle holds " +
                                 std::to_string(real_bytes));
}

bool DeviceTable::complete(std::uint32_t id, std::shared_ptr<const DeviceMapping> mapping) {
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second) return false;
  total_bytes_ += mapping->bytes();
  it->second = std::move(mapping);
  return true;
}

void DeviceTable::cancel(std::uint32_t id) {
  auto it = entries_.find(id);
  if (it != entries_.end() && !it->second) entries_.erase(it);
}

bool DeviceTable::release(std::uint32_t id) {
  auto it = entries_.find(id);
  if (it == entries_.end() || !it->second) return false;
  total_bytes_ -= it->second->bytes();
  entries_.erase(it);
  return true;
}

Result<ResolvedDevice> DeviceTable::resolve(const wire::BufferRef& ref, std::uint64_t bytes,
                                            std::string_view what) const {
  if (ref.buffer_id == 0) {
    if (bytes == 0) return ResolvedDevice{};
    return Status::InvalidArgument(std::string(what) + " GPU buffer is missing (" +
                                   std::to_string(bytes) + " bytes needed)");
  }
  auto it = entries_.find(ref.buffer_id);
  if (it == entries_.end())
    return Status::InvalidArgument(std::string(what) + " GPU allocation " +
                                   std::to_string(ref.buffer_id) +
                                   " is unknown or was unregistered; register it first");
  if (!it->second)
    return Status::InvalidArgument(std::string(what) + " GPU allocation " +
                                   std::to_string(ref.buffer_id) +
                                   " is still being registered; wait for its reply");
  const DeviceMapping& m = *it->second;
  if (ref.offset > m.bytes() || bytes > m.bytes() - ref.offset)
    return Status::InvalidArgument(std::string(what) + " range [" + std::to_string(ref.offset) +
                                   ", +" + std::to_string(bytes) + ") is outside GPU allocation " +
                                   std::to_string(ref.buffer_id) + " of " +
                                   std::to_string(m.bytes()) + " bytes");
  return ResolvedDevice{m.base() + ref.offset, m.device(), it->second};
}

void DeviceTable::clear() {
  entries_.clear();
  total_bytes_ = 0;
}

}  // namespace ringsync::service::device
