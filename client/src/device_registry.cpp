#include "client/src/device_registry.h"

#include <sstream>
#include <string>

namespace ringsync::client {
namespace {

std::string address(std::uintptr_t p) {
  std::ostringstream s;
  s << "0x" << std::hex << p;
  return s.str();
}

bool same(const DeviceAllocation& a, const DeviceAllocation& b) {
  return a.base == b.base && a.bytes == b.bytes && a.device == b.device &&
         a.driver_id == b.driver_id;
}

}  // namespace

std::optional<std::uint32_t> DeviceRegistry::find(const DeviceAllocation& allocation) const {
  std::lock_guard lock(mu_);
  auto it = by_base_.find(allocation.base);
  if (it == by_base_.end() || !same(it->second.allocation, allocation)) return std::nullopt;
  return it->second.id;
}

std::vector<std::uint32_t> DeviceRegistry::take_stale(const DeviceAllocation& allocation) {
  std::vector<std::uint32_t> stale;
  std::lock_guard lock(mu_);
  const std::uintptr_t end = allocation.base + allocation.bytes;
  // Entries starting before `end` whose range reaches past allocation.base.
  auto it = by_base_.lower_bound(end);
  while (it != by_base_.begin()) {
    --it;
    const DeviceAllocation& old = it->second.allocation;
    if (old.base + old.bytes <= allocation.base) break;
    if (same(old, allocation)) continue;
    stale.push_back(it->second.id);
    base_by_id_.erase(it->second.id);
    it = by_base_.erase(it);
  }
  return stale;
}

std::uint32_t DeviceRegistry::next_id() {
  std::lock_guard lock(mu_);
  while (next_id_ == 0 || base_by_id_.count(next_id_)) ++next_id_;
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
  if (by_base_.size() >= kMaxAllocations) return too_many();
  by_base_[allocation.base] = Entry{id, allocation, 0};
  base_by_id_[id] = allocation.base;
  return Status::Ok();
}

Result<std::uint32_t> DeviceRegistry::remove(const void* ptr) {
  const auto p = reinterpret_cast<std::uintptr_t>(ptr);
  std::lock_guard lock(mu_);
  auto it = by_base_.upper_bound(p);
  if (it != by_base_.begin()) --it;
  if (it == by_base_.end() || p < it->first || p - it->first >= it->second.allocation.bytes)
    return Status::InvalidArgument(address(p) +
                                   " is not in a GPU allocation registered on this context");
  if (it->second.pending > 0)
    return Status::InvalidArgument("the GPU allocation at " + address(it->first) + " is used by " +
                                   std::to_string(it->second.pending) +
                                   " pending request(s); wait for them (rs_wait) first");
  const std::uint32_t id = it->second.id;
  base_by_id_.erase(id);
  by_base_.erase(it);
  return id;
}

void DeviceRegistry::pin(std::uint32_t id) {
  std::lock_guard lock(mu_);
  auto base = base_by_id_.find(id);
  if (base != base_by_id_.end()) ++by_base_.at(base->second).pending;
}

void DeviceRegistry::unpin(std::uint32_t id) {
  std::lock_guard lock(mu_);
  auto base = base_by_id_.find(id);
  if (base == base_by_id_.end()) return;
  Entry& entry = by_base_.at(base->second);
  if (entry.pending > 0) --entry.pending;
}

std::size_t DeviceRegistry::size() const {
  std::lock_guard lock(mu_);
  return by_base_.size();
}

}  // namespace ringsync::client
