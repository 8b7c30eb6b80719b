// A TCP relay for one test: listens on a free loopback port and forwards every
// connection to a loopback target port, both ways, keeping a copy of every
// byte it forwarded: what someone on the path between two daemons would see.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace ringsync::test {

class TcpRelay {
 public:
  explicit TcpRelay(std::uint16_t target_port);
  // Stops forwarding and closes every connection.
  ~TcpRelay();
  TcpRelay(const TcpRelay&) = delete;
  TcpRelay& operator=(const TcpRelay&) = delete;

  std::uint16_t port() const { return port_; }
  // Every byte forwarded so far, both directions, in the order read.
  std::string captured() const;
  // Connections accepted so far.
  int connections() const { return connections_; }

 private:
  void run();

  std::uint16_t target_port_;
  std::uint16_t port_ = 0;
  int listen_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  mutable std::mutex mutex_;
  std::string captured_;
  std::thread thread_;
};

}  // namespace ringsync::test
