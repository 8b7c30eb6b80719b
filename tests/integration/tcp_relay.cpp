#include "tcp_relay.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>
#include <vector>

namespace ringsync::test {

namespace {

sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  return addr;
}

}  // namespace

TcpRelay::TcpRelay(std::uint16_t target_port) : target_port_(target_port) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr = loopback(0);
  socklen_t len = sizeof(addr);
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listen_fd_, 16) != 0 || ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (listen_fd_ >= 0) ::close(listen_fd_);
    throw std::runtime_error("the relay cannot listen on loopback");
  }
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] { run(); });
}

TcpRelay::~TcpRelay() {
  stop_ = true;
  thread_.join();
  ::close(listen_fd_);
}

std::string TcpRelay::captured() const {
  std::lock_guard lock(mutex_);
  return captured_;
}

void TcpRelay::run() {
  // fds[2k] and fds[2k+1] are the two ends of one relayed connection; a
  // closed pair stays with -1 (poll skips negative descriptors).
  std::vector<int> fds;
  auto close_pair = [&](std::size_t i) {
    const std::size_t first = i & ~std::size_t{1};
    for (std::size_t j : {first, first + 1}) {
      if (fds[j] >= 0) ::close(fds[j]);
      fds[j] = -1;
    }
  };
  while (!stop_) {
    std::vector<pollfd> polled{{listen_fd_, POLLIN, 0}};
    for (int fd : fds) polled.push_back({fd, POLLIN, 0});
    if (::poll(polled.data(), polled.size(), 50) <= 0) continue;
    // Only the descriptors polled now: an accept below adds two more.
    const std::size_t polled_fds = fds.size();
    if (polled[0].revents & POLLIN) {
      const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client >= 0) {
        const int upstream = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        const sockaddr_in target = loopback(target_port_);
        if (upstream >= 0 && ::connect(upstream, reinterpret_cast<const sockaddr*>(&target), sizeof(target)) == 0) {
          fds.push_back(client);
          fds.push_back(upstream);
          ++connections_;
        } else {
          ::close(client);
          if (upstream >= 0) ::close(upstream);
        }
      }
    }
    for (std::size_t i = 0; i < polled_fds; ++i) {
      if (fds[i] < 0 || !(polled[i + 1].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buffer[16384];
      const ssize_t n = ::read(fds[i], buffer, sizeof buffer);
      const int other = fds[i ^ 1];
      if (n <= 0 || other < 0 || ::send(other, buffer, static_cast<std::size_t>(n), MSG_NOSIGNAL) != n) {
        close_pair(i);
        continue;
      }
      std::lock_guard lock(mutex_);
      captured_.append(buffer, static_cast<std::size_t>(n));
    }
  }
  for (int fd : fds)
    if (fd >= 0) ::close(fd);
}

}  // namespace ringsync::test
