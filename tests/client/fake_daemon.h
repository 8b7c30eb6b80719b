// A scripted stand-in for ringsyncd on a Unix socket, for client tests: it
// answers the hello and buffer allocations by itself and queues every other
// message for the test, which answers as it likes.
#pragma once

#include <doctest/doctest.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <variant>

#include "common/shm.h"
#include "common/status.h"
#include "common/wire.h"
#include "ringsync/ringsync.h"

namespace ringsync::testing {

// A fresh socket path under the temp directory.
std::string temp_socket_path(const std::string& tag);

class FakeDaemon {
 public:
  struct Options {
    bool answer_hello = true;
    Status hello_status;
    std::uint32_t protocol_version = wire::kProtocolVersion;
    bool answer_allocs = true;  // false: AllocBuffer is queued like any other message
    std::uint32_t heartbeat_ms = 0;  // the hello reply asks for heartbeats this often
  };

  FakeDaemon() : FakeDaemon(Options{}) {}
  explicit FakeDaemon(Options options);
  FakeDaemon(const FakeDaemon&) = delete;
  FakeDaemon& operator=(const FakeDaemon&) = delete;
  ~FakeDaemon();

  const std::string& path() const { return path_; }
  // A config for this daemon (job "test", 2 s connect timeout).
  rs_config_t config(int rank = 0, int size = 1) const;

  // The next queued message, or nullopt after `timeout` or once the client left.
  std::optional<wire::Message> next(std::chrono::milliseconds timeout = std::chrono::seconds(5));

  template <typename T>
  T expect() {
    auto m = next();
    REQUIRE(m.has_value());
    REQUIRE(std::holds_alternative<T>(*m));
    return std::get<T>(std::move(*m));
  }

  // Sends a message, with `fd` attached when >= 0.
  void send(const wire::Message& message, int fd = -1);
  void complete(std::uint64_t request_id, Status status = Status::Ok());

  // The daemon's mapping of a buffer it issued (nullptr for unknown ids).
  std::byte* buffer(std::uint32_t buffer_id);
  // Answers a queued AllocBuffer (with answer_allocs = false).
  void grant(const wire::AllocBuffer& request);

  // Whether the client closed its connection, waiting up to `timeout` for it.
  bool client_gone(std::chrono::milliseconds timeout);

  const wire::Hello& hello() const { return hello_; }
  int allocations() const;
  // Shuts the client's connection down, as a daemon that goes away would.
  void drop_client();

 private:
  void serve();

  Options options_;
  std::string path_;
  int listen_fd_ = -1;
  int client_fd_ = -1;
  std::thread thread_;
  wire::Hello hello_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<wire::Message> queue_;
  bool client_gone_ = false;
  std::map<std::uint32_t, shm::Region> regions_;
  std::uint32_t next_buffer_id_ = 1;
  int allocations_ = 0;
};

}  // namespace ringsync::testing
