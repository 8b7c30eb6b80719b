#include "client/src/device_registry.h"

#include <sstream>
#include <string>

#include "client/src/address_text.h"

namespace ringsync::client {
namespace {

bool same(const DeviceAllocation& a, const DeviceAllocation& b) {
  return a.base == b.base && a.bytes == b.bytes && a.device == b.device &&
         a.driver_id == b.driver_id;
}

}  // namespace

std::optional<std::uint32_t> DeviceRegistry::find(const DeviceAllocation& allocation) const {
  std::lock_guard lock(mu_);
  auto it = ranges_.by_base.find(allocation.base);
  if (it == ranges_.by_base.end() || !same(it->second.allocation, allocation)) return std::nullopt;
  return it->second.id;
}

std::vector<std::uint32_t> DeviceRegistry::take_stale(const DeviceAllocation& allocation) {
  std::vector<std::uint32_t> stale;
  std::lock_guard lock(mu_);
  const std::uintptr_t end = allocation.base + allocation.bytes;
  // Entries starting before `end` whose range reaches past allocation.base.
  auto it = ranges_.by_base.lower_bound(end);
  while (it != ranges_.by_base.begin()) {
    --it;
    const DeviceAllocation& old = it->second.allocation;
    if (old.base + old.bytes <= allocation.base) break;
    if (same(old, allocation)) continue;
    stale.push_back(it->second.id);
    ranges_.base_by_id.erase(it->second.id);
    it = ranges_.by_base.erase(it);
  }
  return stale;
}

std::uint32_t DeviceRegistry::next_id() {
  std::lock_guard lock(mu_);
  while (next_id_ == 0 || ranges_.base_by_id.count(next_id_)) ++next_id_;
  return next_id_++;
}

Status DeviceRegistry::too_many() {
  return Status::InvalidArgument(
      "this connection has " + std::to_string(kMaxAllocations) +
      " GPU allocations registered already; unregister some (rs_unregister_device) or use "
      "fewer, larger allocations");
}

Status DeviceRegistry::add(std::uint32_t id, const DeviceAllocation& allocation) {
  std::lock_guard lock(mu_);
  if (ranges_.by_base.size() >= kMaxAllocations) return too_many();
  ranges_.by_base[allocation.base] = Entry{id, allocation, 0};
  ranges_.base_by_id[id] = allocation.base;
  return Status::Ok();
}

Result<std::uint32_t> DeviceRegistry::remove(const void* ptr) {
  const auto p = reinterpret_cast<std::uintptr_t>(ptr);
  std::lock_guard lock(mu_);
  auto it = ranges_.by_base.upper_bound(p);
  if (it != ranges_.by_base.begin()) --it;
  if (it == ranges_.by_base.end() || p < it->first || p - it->first >= it->second.allocation.bytes)
    return Status::InvalidArgument(address_text(p) +
                                   " is not in a GPU allocation registered on this context");
  if (it->second.pending > 0)
    return Status::InvalidArgument("the GPU allocation at " + address_text(it->first) + " is used by " +
                                   std::to_string(it->second.pending) +
                                   " pending request(s); wait for them (rs_wait) first");
  const std::uint32_t id = it->second.id;
  ranges_.base_by_id.erase(id);
  ranges_.by_base.erase(it);
  return id;
}

void DeviceRegistry::pin(std::uint32_t id) {
  std::lock_guard lock(mu_);
  ranges_.pin(id);
}

void DeviceRegistry::unpin(std::uint32_t id) {
  std::lock_guard lock(mu_);
  ranges_.unpin(id);
}

std::size_t DeviceRegistry::size() const {
  std::lock_guard lock(mu_);
  return ranges_.by_base.size();
}

}  // namespace ringsync::client
