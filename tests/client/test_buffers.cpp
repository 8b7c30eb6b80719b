#include <doctest/doctest.h>

#include <string>

#include "client/src/buffers.h"

namespace test_client_buffers {

using ringsync::StatusCode;
using ringsync::client::SharedBuffers;

namespace {
void* add(SharedBuffers& buffers, std::uint32_t id, std::size_t bytes) {
  auto region = ringsync::shm::Region::create(bytes, "buffers-test");
  REQUIRE(region.ok());
  return buffers.add(id, std::move(*region), bytes);
}
bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}
}  // namespace

TEST_CASE("pointers inside a shared buffer resolve to its id and offset") {
  SharedBuffers buffers;
  auto* a = static_cast<std::byte*>(add(buffers, 3, 1000));
  auto* b = static_cast<std::byte*>(add(buffers, 4, 8192));
  CHECK(buffers.size() == 2);

  auto at = buffers.find(a + 10, 990);
  REQUIRE(at.ok());
  REQUIRE(at->has_value());
  CHECK((*at)->buffer_id == 3);
  CHECK((*at)->offset == 10);

  auto in_b = buffers.find(b + 8191, 1);
  REQUIRE(in_b.ok());
  REQUIRE(in_b->has_value());
  CHECK((*in_b)->buffer_id == 4);

  int local = 0;
  auto outside = buffers.find(&local, sizeof(local));
  REQUIRE(outside.ok());
  CHECK_FALSE(outside->has_value());

  // One past the requested size is not inside the buffer.
  auto past = buffers.find(a + 1000, 4);
  REQUIRE(past.ok());
  CHECK_FALSE(past->has_value());

  auto overrun = buffers.find(a + 996, 8);
  REQUIRE_FALSE(overrun.ok());
  CHECK(overrun.status().code() == StatusCode::kInvalidArgument);
  CHECK(contains(overrun.status().message(), "run past the end of the shared buffer"));
}

TEST_CASE("a buffer is removed only by its base pointer and only when no request uses it") {
  SharedBuffers buffers;
  auto* a = static_cast<std::byte*>(add(buffers, 3, 4096));

  auto interior = buffers.remove(a + 8);
  REQUIRE_FALSE(interior.ok());
  CHECK(contains(interior.status().message(), "points inside the shared buffer"));

  buffers.pin(3);
  buffers.pin(3);
  auto busy = buffers.remove(a);
  REQUIRE_FALSE(busy.ok());
  CHECK(contains(busy.status().message(), "used by 2 pending request(s)"));
  buffers.unpin(3);
  CHECK_FALSE(buffers.remove(a).ok());
  buffers.unpin(3);

  auto removed = buffers.remove(a);
  REQUIRE(removed.ok());
  CHECK(*removed == 3);
  CHECK(buffers.size() == 0);

  auto again = buffers.remove(a);
  REQUIRE_FALSE(again.ok());
  CHECK(contains(again.status().message(), "is not a buffer from rs_alloc()"));
}

}  // namespace test_client_buffers
