#include "common/loopback_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <string>

namespace ringsync {
namespace {

// Below the ephemeral range: this many ports at most, never under 1024.
constexpr int kBelowRange = 16384;
constexpr int kTries = 256;

std::uint16_t bound_port(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return 0;
  return ntohs(addr.sin_port);
}

}  // namespace

int bind_loopback(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const int err = errno;
    ::close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

std::pair<int, int> ephemeral_port_range() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int first = 0, last = 0;
  if (in >> first >> last && first > 0 && first <= last && last <= 65535) return {first, last};
  return {32768, 60999};
}

Result<std::vector<std::uint16_t>> free_loopback_ports(int count) {
  const int first = ephemeral_port_range().first;
  const int low = std::max(1024, first - kBelowRange), high = first - 1;
  if (high - low + 1 < 1024) return free_loopback_ports_between(count, 0, -1);  // no room below
  return free_loopback_ports_between(count, low, high);
}

Result<std::vector<std::uint16_t>> free_loopback_ports_between(int count, int low, int high) {
  low = std::max(low, 1);
  high = std::min(high, 65535);
  const bool below = low <= high;
  std::mt19937 pick(std::random_device{}());
  std::uniform_int_distribution<int> port_below(low, std::max(low, high));
  // Every chosen port stays bound until all are chosen, so none repeats.
  std::vector<int> held;
  std::vector<std::uint16_t> ports;
  Status error;
  for (int i = 0; i < count; ++i) {
    int fd = -1;
    for (int t = 0; below && t < kTries && fd < 0; ++t) fd = bind_loopback(static_cast<std::uint16_t>(port_below(pick)));
    if (fd < 0) fd = bind_loopback(0);  // no free port below the range: inside it
    const std::uint16_t port = fd < 0 ? 0 : bound_port(fd);
    if (port == 0) {
      error = Status::Internal(std::string("cannot find a free TCP port on 127.0.0.1: ") + std::strerror(errno));
      if (fd >= 0) ::close(fd);
      break;
    }
    held.push_back(fd);
    ports.push_back(port);
  }
  for (int fd : held) ::close(fd);
  if (!error.ok()) return error;
  return ports;
}

}  // namespace ringsync
