// A client's registered GPU allocations in the daemon: reservation while the
// mapping opens, bounds-checked lookups, unregistration and the keepalive
// that holds a mapping open while a collective still uses it.
#include <doctest/doctest.h>

#include <memory>
#include <vector>

#include "service/device/table.h"

namespace test_service_device_table {

using namespace ringsync;
using namespace ringsync::service;

namespace {

wire::RegisterDevice request(std::uint32_t id, std::uint64_t bytes = 4096, int device = 0) {
  wire::RegisterDevice r;
  r.request_id = 1;
  r.allocation_id = id;
  r.bytes = bytes;
  r.device = device;
  return r;
}

// A "mapping" of plain memory that counts its unmapping.
std::shared_ptr<const device::DeviceMapping> mapping(std::vector<std::byte>& memory, int device,
                                             int& closed) {
  return std::make_shared<const device::DeviceMapping>(memory.data(), memory.size(), device,
                                               [&closed](void*) { ++closed; });
}

}  // namespace

TEST_CASE("a registration is reserved, completed, resolved with bounds and released") {
  device::DeviceTable table;
  std::vector<std::byte> memory(4096);
  int closed = 0;
  REQUIRE(table.reserve(request(7)).ok());
  auto opening = table.resolve({7, 0}, 16, "send");
  CHECK(opening.status().message().find("still being registered") != std::string::npos);
  CHECK_FALSE(table.release(7));  // not mapped yet

  REQUIRE(table.complete(7, mapping(memory, 2, closed)));
  CHECK(table.total_bytes() == 4096);
  auto whole = table.resolve({7, 0}, 4096, "send");
  REQUIRE(whole.ok());
  CHECK(whole->data == memory.data());
  CHECK(whole->device == 2);
  CHECK(table.resolve({7, 4000}, 96, "receive").ok());
  auto past = table.resolve({7, 4000}, 97, "receive");
  CHECK(past.status().code() == StatusCode::kInvalidArgument);
  CHECK(past.status().message().find("outside GPU allocation 7") != std::string::npos);
  CHECK_FALSE(table.resolve({7, UINT64_MAX}, 2, "send").ok());  // no overflow
  CHECK_FALSE(table.resolve({7, 4097}, 0, "send").ok());
  CHECK(table.resolve({0, 0}, 0, "send").ok());
  CHECK(table.resolve({0, 0}, 1, "send").status().message().find("missing") != std::string::npos);
  CHECK(table.resolve({8, 0}, 1, "receive").status().message().find("unknown") !=
        std::string::npos);

  // The mapping outlives its unregistration while a collective holds it.
  auto keep = whole->keepalive;
  CHECK(table.release(7));
  CHECK(table.total_bytes() == 0);
  CHECK_FALSE(table.release(7));
  CHECK(closed == 0);
  keep.reset();
  whole = device::ResolvedDevice{};
  CHECK(closed == 1);
}

TEST_CASE("bad registrations are refused with a reason") {
  device::DeviceTable table;
  CHECK(table.reserve(request(0)).message().find("id 0 is reserved") != std::string::npos);
  CHECK(table.reserve(request(1, 0)).message().find("0 bytes") != std::string::npos);
  CHECK(table.reserve(request(1, 64, -1)).message().find("device -1") != std::string::npos);
  REQUIRE(table.reserve(request(1)).ok());
  CHECK(table.reserve(request(1)).message().find("being opened") != std::string::npos);
  std::vector<std::byte> memory(64);
  int closed = 0;
  REQUIRE(table.complete(1, mapping(memory, 0, closed)));
  auto duplicate = table.reserve(request(1));
  CHECK(duplicate.code() == StatusCode::kInvalidArgument);
  CHECK(duplicate.message().find("registered already") != std::string::npos);
}

TEST_CASE("a cancelled or cleared reservation takes no late mapping") {
  device::DeviceTable table;
  std::vector<std::byte> memory(64);
  int closed = 0;
  REQUIRE(table.reserve(request(3)).ok());
  table.cancel(3);
  CHECK(table.size() == 0);
  REQUIRE(table.reserve(request(4)).ok());
  table.clear();  // the client left while its mapping opened
  {
    auto late = mapping(memory, 0, closed);
    CHECK_FALSE(table.complete(4, late));
  }
  CHECK(closed == 1);  // the caller dropped it: unmapped
}

TEST_CASE("a client registers a bounded number of allocations") {
  device::DeviceTable table;
  for (std::uint32_t id = 1; id <= device::DeviceTable::kMaxAllocations; ++id)
    REQUIRE(table.reserve(request(id)).ok());
  CHECK(table.reserve(request(device::DeviceTable::kMaxAllocations + 1)).message().find("unregister") !=
        std::string::npos);
  table.clear();
  CHECK(table.size() == 0);
}

TEST_CASE("a registration claiming more bytes than its allocation holds is refused") {
  CHECK(device::DeviceTable::check_mapped_size(request(3, 4096), 4096).ok());
  CHECK(device::DeviceTable::check_mapped_size(request(3, 4096), 2u << 20).ok());
  const Status too_big = device::DeviceTable::check_mapped_size(request(3, 8192), 4096);
  CHECK(too_big.code() == StatusCode::kInvalidArgument);
  CHECK(too_big.message().find("registered as 8192 bytes") != std::string::npos);
  CHECK(too_big.message().find("holds 4096") != std::string::npos);
}

}  // namespace test_service_device_table
