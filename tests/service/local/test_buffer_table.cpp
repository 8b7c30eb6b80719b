#include <doctest/doctest.h>

#include "service/local/buffer_table.h"

namespace test_service_local_buffer_table {

using namespace ringsync;
using namespace ringsync::service;

TEST_CASE("allocation, bounds-checked resolution and release") {
  local::BufferTable table;
  auto a = table.allocate(4096, 1 << 20, "t");
  REQUIRE(a.ok());
  const auto id = a->first;
  CHECK(id != 0);
  CHECK(table.total_bytes() == 4096);
  auto whole = table.resolve({id, 0}, 4096, "send");
  REQUIRE(whole.ok());
  CHECK(whole->data == a->second->data());
  CHECK(table.resolve({id, 4000}, 96, "send").ok());
  auto past = table.resolve({id, 4000}, 97, "send");
  CHECK(past.status().code() == StatusCode::kInvalidArgument);
  CHECK(past.status().message().find("outside buffer") != std::string::npos);
  CHECK_FALSE(table.resolve({id, UINT64_MAX}, 2, "send").ok());  // no overflow
  CHECK(table.resolve({0, 0}, 0, "send").ok());
  CHECK(table.resolve({0, 0}, 1, "send").status().message().find("missing") != std::string::npos);
  CHECK(table.resolve({id + 1, 0}, 1, "recv").status().message().find("unknown") !=
        std::string::npos);

  // The region outlives its release while a collective still holds it.
  auto keep = whole->keepalive;
  CHECK(table.release(id));
  CHECK_FALSE(table.release(id));
  CHECK(table.total_bytes() == 0);
  keep->data()[4095] = std::byte{7};
  CHECK(keep->data()[4095] == std::byte{7});
}

TEST_CASE("the per-client limit is enforced") {
  local::BufferTable table;
  REQUIRE(table.allocate(600, 1000, "t").ok());
  auto over = table.allocate(500, 1000, "t");
  CHECK(over.status().code() == StatusCode::kOutOfMemory);
  CHECK(over.status().message().find("--max-client-buffer-bytes") != std::string::npos);
  CHECK(table.allocate(0, 1000, "t").status().code() == StatusCode::kInvalidArgument);
}

}  // namespace test_service_local_buffer_table
