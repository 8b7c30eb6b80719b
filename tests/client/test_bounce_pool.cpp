#include <doctest/doctest.h>

#include "client/src/bounce_pool.h"

namespace test_client_bounce_pool {

using ringsync::client::BounceBuffer;
using ringsync::client::BouncePool;

namespace {
BounceBuffer buffer(std::uint32_t id, std::size_t size_class) {
  auto region = ringsync::shm::Region::create(4096, "bounce-test");
  REQUIRE(region.ok());
  return BounceBuffer{id, size_class, std::move(*region)};
}
}  // namespace

TEST_CASE("size classes are powers of two of at least 64 KiB") {
  CHECK(BouncePool::size_class(1) == 64 * 1024);
  CHECK(BouncePool::size_class(64 * 1024) == 64 * 1024);
  CHECK(BouncePool::size_class(64 * 1024 + 1) == 128 * 1024);
  CHECK(BouncePool::size_class(3 << 20) == std::size_t{4} << 20);
  CHECK_FALSE(BouncePool::size_class(~std::size_t{0}).has_value());
}

TEST_CASE("a buffer given back is reused for its class only") {
  BouncePool pool;
  CHECK_FALSE(pool.take(1 << 16).has_value());
  CHECK_FALSE(pool.give_back(buffer(7, 1 << 16)).has_value());
  CHECK(pool.idle_count() == 1);
  CHECK(pool.idle_bytes() == 1 << 16);
  CHECK_FALSE(pool.take(1 << 17).has_value());
  auto again = pool.take(1 << 16);
  REQUIRE(again.has_value());
  CHECK(again->buffer_id == 7);
  CHECK(pool.idle_count() == 0);
  CHECK(pool.idle_bytes() == 0);
}

TEST_CASE("the pool keeps a bounded number of idle buffers per class") {
  BouncePool pool;
  std::uint32_t id = 1;
  for (std::size_t i = 0; i < BouncePool::kMaxIdlePerClass; ++i)
    CHECK_FALSE(pool.give_back(buffer(id++, 1 << 16)).has_value());
  auto surplus = pool.give_back(buffer(id, 1 << 16));
  REQUIRE(surplus.has_value());
  CHECK(surplus->buffer_id == id);
  CHECK(pool.idle_count() == BouncePool::kMaxIdlePerClass);
}

TEST_CASE("past the idle byte cap only classes without an idle buffer keep one") {
  BouncePool pool;
  const std::size_t huge = BouncePool::kMaxIdleBytes;  // fills the cap alone
  CHECK_FALSE(pool.give_back(buffer(1, huge)).has_value());
  CHECK(pool.give_back(buffer(2, huge)).has_value());           // same class, over the cap
  CHECK_FALSE(pool.give_back(buffer(3, 1 << 16)).has_value());  // empty class keeps one
  CHECK(pool.give_back(buffer(4, 1 << 16)).has_value());
  auto all = pool.drain();
  CHECK(all.size() == 2);
  CHECK(pool.idle_count() == 0);
  CHECK(pool.idle_bytes() == 0);
}

}  // namespace test_client_bounce_pool
