// The client's table of registered GPU allocations: lookups by allocation,
// stale entries after memory was freed and allocated again, pins, limits.
#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "client/src/device_registry.h"

namespace test_client_device_registry {

using ringsync::StatusCode;
using ringsync::client::DeviceAllocation;
using ringsync::client::DeviceRegistry;

namespace {

DeviceAllocation allocation(std::uintptr_t base, std::size_t bytes, std::uint64_t driver_id = 1) {
  DeviceAllocation a;
  a.base = base;
  a.bytes = bytes;
  a.device = 0;
  a.driver_id = driver_id;
  return a;
}

}  // namespace

TEST_CASE("a registered allocation is found again, a different one is not") {
  DeviceRegistry registry;
  const auto a = allocation(0x1000, 0x100);
  CHECK_FALSE(registry.find(a).has_value());
  const auto id = registry.next_id();
  CHECK(id != 0);
  REQUIRE(registry.add(id, a).ok());
  REQUIRE(registry.find(a).has_value());
  CHECK(*registry.find(a) == id);
  CHECK_FALSE(registry.find(allocation(0x1000, 0x100, 2)).has_value());  // reallocated
  CHECK_FALSE(registry.find(allocation(0x1000, 0x200)).has_value());
  CHECK(registry.next_id() != id);
}

TEST_CASE("memory freed and allocated again makes overlapping registrations stale") {
  DeviceRegistry registry;
  REQUIRE(registry.add(1, allocation(0x1000, 0x100)).ok());
  REQUIRE(registry.add(2, allocation(0x1100, 0x100)).ok());
  REQUIRE(registry.add(3, allocation(0x1200, 0x100)).ok());
  REQUIRE(registry.add(4, allocation(0x5000, 0x100)).ok());
  // A new allocation covering the first two and part of the third.
  auto stale = registry.take_stale(allocation(0x1000, 0x280, 9));
  std::sort(stale.begin(), stale.end());
  CHECK(stale == std::vector<std::uint32_t>{1, 2, 3});
  CHECK(registry.size() == 1);
  // The registration itself is never stale.
  REQUIRE(registry.add(5, allocation(0x1000, 0x280, 9)).ok());
  CHECK(registry.take_stale(allocation(0x1000, 0x280, 9)).empty());
  CHECK(registry.size() == 2);
}

TEST_CASE("unregistering needs a pointer inside a registration no request uses") {
  DeviceRegistry registry;
  REQUIRE(registry.add(7, allocation(0x2000, 0x100)).ok());
  auto outside = registry.remove(reinterpret_cast<const void*>(0x2100));
  CHECK(outside.status().code() == StatusCode::kInvalidArgument);
  CHECK(registry.remove(reinterpret_cast<const void*>(0x1000)).status().code() ==
        StatusCode::kInvalidArgument);
  registry.pin(7);
  auto busy = registry.remove(reinterpret_cast<const void*>(0x2010));
  CHECK(busy.status().code() == StatusCode::kInvalidArgument);
  CHECK(busy.status().message().find("pending") != std::string::npos);
  registry.unpin(7);
  registry.unpin(7);  // extra unpins do no harm
  registry.unpin(99);
  auto removed = registry.remove(reinterpret_cast<const void*>(0x2010));  // interior is fine
  REQUIRE(removed.ok());
  CHECK(*removed == 7);
  CHECK(registry.size() == 0);
}

TEST_CASE("a connection holds a bounded number of registrations") {
  DeviceRegistry registry;
  for (std::size_t i = 0; i < DeviceRegistry::kMaxAllocations; ++i)
    REQUIRE(registry.add(registry.next_id(), allocation(0x10000 + i * 0x100, 0x100)).ok());
  auto full = registry.add(registry.next_id(), allocation(0x1, 0x10));
  CHECK(full.code() == StatusCode::kInvalidArgument);
  CHECK(full.message().find("rs_unregister_device") != std::string::npos);
}

}  // namespace test_client_device_registry
