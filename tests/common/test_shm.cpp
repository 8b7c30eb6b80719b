#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "common/shm.h"

namespace test_common_shm {

using namespace ringsync;

TEST_CASE("a region is shared through its fd, and its size is sealed") {
  auto region = shm::Region::create(8192, "test");
  REQUIRE(region.ok());
  std::memset(region->data(), 0x5a, 8192);
  // What the trainer does with the fd it receives.
  const int trainer_fd = fcntl(region->fd(), F_DUPFD_CLOEXEC, 0);
  REQUIRE(trainer_fd >= 0);
  CHECK(ftruncate(trainer_fd, 0) == -1);  // cannot pull pages from under the daemon
  CHECK(errno == EPERM);
  CHECK(ftruncate(trainer_fd, 1 << 20) == -1);
  CHECK(fcntl(trainer_fd, F_ADD_SEALS, F_SEAL_WRITE) == -1);  // seals are sealed
  auto mapped = shm::Region::map(trainer_fd, 8192);
  REQUIRE(mapped.ok());
  CHECK(mapped->data()[8191] == std::byte{0x5a});
  mapped->data()[0] = std::byte{1};
  CHECK(region->data()[0] == std::byte{1});

  // Handing over the descriptor keeps the mapping.
  region->close_fd();
  CHECK(region->fd() == -1);
  region->data()[1] = std::byte{2};
  CHECK(mapped->data()[1] == std::byte{2});
}

TEST_CASE("bounds checks and bad arguments") {
  auto region = shm::Region::create(100, "test");
  REQUIRE(region.ok());
  CHECK(region->contains(0, 100));
  CHECK(region->contains(100, 0));
  CHECK_FALSE(region->contains(1, 100));
  CHECK_FALSE(region->contains(101, 0));
  CHECK_FALSE(region->contains(50, SIZE_MAX));  // no wrap-around
  CHECK(shm::Region::create(0, "x").status().code() == StatusCode::kInvalidArgument);
  CHECK(shm::Region::map(-1, 10).status().code() == StatusCode::kInvalidArgument);
  CHECK(shm::Region::create(64, std::string(400, 'n')).ok());  // long names are cut, not refused
}

}  // namespace test_common_shm
