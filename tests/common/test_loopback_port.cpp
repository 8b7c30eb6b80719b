#include "common/loopback_port.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <vector>

namespace ringsync {
namespace {

// Whether 127.0.0.1:port can be bound now.
bool can_bind(std::uint16_t port) {
  const int fd = bind_loopback(port);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

TEST_CASE("the ephemeral range is the kernel's") {
  const auto [first, last] = ephemeral_port_range();
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int kernel_first = 0, kernel_last = 0;
  REQUIRE(static_cast<bool>(in >> kernel_first >> kernel_last));
  CHECK(first == kernel_first);
  CHECK(last == kernel_last);
}

TEST_CASE("free loopback ports are distinct, free, and below the ephemeral range") {
  const int first = ephemeral_port_range().first;
  auto ports = free_loopback_ports(8);
  REQUIRE(ports.ok());
  REQUIRE(ports->size() == 8);
  CHECK(std::set<std::uint16_t>(ports->begin(), ports->end()).size() == 8);
  for (std::uint16_t port : *ports) {
    INFO("port ", port);
    CHECK(port >= 1024);
    // Connections made meanwhile take ports from the range, never from below it.
    if (first - 1024 >= 2047) CHECK(port < first);
    CHECK(can_bind(port));
  }
  auto none = free_loopback_ports(0);
  REQUIRE(none.ok());
  CHECK(none->empty());
}

TEST_CASE("a port held by a socket is not handed out; with none free in the range, the kernel picks") {
  // Eleven ports in a row below the ephemeral range, all held but one.
  const int first = ephemeral_port_range().first;
  std::vector<int> fds;
  int base = 0;
  for (int start = std::max(1024, first - 4096); start + 11 < first && base == 0; start += 11) {
    std::vector<int> run;
    for (int p = start; p < start + 11; ++p) {
      const int fd = bind_loopback(static_cast<std::uint16_t>(p));
      if (fd < 0) break;
      run.push_back(fd);
    }
    if (run.size() == 11) {
      base = start;
      fds = run;
    } else {
      for (int fd : run) ::close(fd);
    }
  }
  REQUIRE(base != 0);
  const int free_port = base + 5;
  ::close(fds[5]);
  fds.erase(fds.begin() + 5);
  auto one = free_loopback_ports_between(1, base, base + 10);
  REQUIRE(one.ok());
  REQUIRE(one->size() == 1);
  CHECK(one->front() == free_port);
  // Held too: nothing in the range is free, so the port comes from the kernel.
  const int again = bind_loopback(static_cast<std::uint16_t>(free_port));
  REQUIRE(again >= 0);
  fds.push_back(again);
  auto fallback = free_loopback_ports_between(1, base, base + 10);
  REQUIRE(fallback.ok());
  REQUIRE(fallback->size() == 1);
  CHECK((fallback->front() < base || fallback->front() > base + 10));
  CHECK(can_bind(fallback->front()));
  for (int fd : fds) ::close(fd);
}

}  // namespace
}  // namespace ringsync
