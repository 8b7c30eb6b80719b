// rs_connect against missing, silent, refusing and garbage-speaking servers, and
// the hello exchange with a (fake) daemon.
#include <doctest/doctest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>

#include "fake_daemon.h"
#include "ringsync/ringsync.h"

namespace test_client_connect {

using ringsync::Status;
using ringsync::testing::FakeDaemon;
using ringsync::testing::temp_socket_path;

namespace {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// A listening socket whose server runs `behave(client_fd)` for one client.
class OneShotServer {
 public:
  template <typename Behave>
  explicit OneShotServer(Behave behave) : path_(temp_socket_path("oneshot")) {
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    REQUIRE(listen(fd_, 1) == 0);
    thread_ = std::thread([this, behave] {
      const int client = accept(fd_, nullptr, nullptr);
      if (client < 0) return;
      behave(client);
      close(client);
    });
  }
  ~OneShotServer() {
    shutdown(fd_, SHUT_RDWR);
    thread_.join();
    close(fd_);
    unlink(path_.c_str());
  }
  rs_config_t config(int timeout_ms) const {
    rs_config_t c;
    rs_config_init(&c);
    c.socket_path = path_.c_str();
    c.local_rank = 0;
    c.local_size = 1;
    c.connect_timeout_ms = timeout_ms;
    return c;
  }

 private:
  std::string path_;
  int fd_ = -1;
  std::thread thread_;
};

// Reads until the peer closes.
void drain(int fd) {
  char buf[256];
  while (read(fd, buf, sizeof(buf)) > 0) {
  }
}

}  // namespace

TEST_CASE("connecting to a missing socket fails with RS_CLOSED naming the path and the fix") {
  const std::string path = temp_socket_path("missing");
  rs_config_t c;
  rs_config_init(&c);
  c.socket_path = path.c_str();
  c.local_rank = 0;
  c.local_size = 1;
  c.connect_timeout_ms = 50;
  rs_context_t* ctx = reinterpret_cast<rs_context_t*>(0x1);
  CHECK(rs_connect(&c, &ctx) == RS_CLOSED);
  CHECK(ctx == nullptr);
  const std::string error = rs_last_error();
  CHECK(contains(error, "cannot connect to ringsyncd at " + path));
  CHECK(contains(error, "No such file or directory"));
  CHECK(contains(error, "start ringsyncd"));
  CHECK(contains(error, "RINGSYNC_SOCKET"));
}

TEST_CASE("a socket nobody listens on is refused until the timeout") {
  const std::string path = temp_socket_path("refused");
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);  // bound, not listening
  rs_config_t c;
  rs_config_init(&c);
  c.socket_path = path.c_str();
  c.connect_timeout_ms = 50;
  rs_context_t* ctx = nullptr;
  CHECK(rs_connect(&c, &ctx) == RS_CLOSED);
  CHECK(contains(rs_last_error(), "Connection refused"));
  close(fd);
  unlink(path.c_str());
}

TEST_CASE("a daemon that starts listening late is still reached within the timeout") {
  FakeDaemon* daemon = nullptr;
  rs_config_t c;
  rs_config_init(&c);
  const std::string path = temp_socket_path("late");
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    // The fake binds its own path; point the client at it through a symlink.
    daemon = new FakeDaemon();
    CHECK(symlink(daemon->path().c_str(), path.c_str()) == 0);
  });
  c.socket_path = path.c_str();
  c.local_rank = 0;
  c.local_size = 1;
  c.connect_timeout_ms = 10000;
  rs_context_t* ctx = nullptr;
  CHECK(rs_connect(&c, &ctx) == RS_SUCCESS);
  late.join();
  rs_disconnect(ctx);
  unlink(path.c_str());
  delete daemon;
}

TEST_CASE("a server that speaks something else fails the connect with RS_PROTOCOL_ERROR") {
  OneShotServer server([](int fd) {
    const char reply[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
    CHECK(write(fd, reply, sizeof(reply) - 1) > 0);
    drain(fd);
  });
  const rs_config_t c = server.config(2000);
  rs_context_t* ctx = nullptr;
  CHECK(rs_connect(&c, &ctx) == RS_PROTOCOL_ERROR);
  CHECK(ctx == nullptr);
  CHECK(contains(rs_last_error(), "exceeds the limit"));
  CHECK(contains(rs_last_error(), "a ringsyncd socket of a compatible version"));
}

TEST_CASE("a server that sends a well-sized but malformed frame fails with RS_PROTOCOL_ERROR") {
  OneShotServer server([](int fd) {
    const unsigned char frame[] = {8, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8};
    CHECK(write(fd, frame, sizeof(frame)) > 0);
    drain(fd);
  });
  const rs_config_t c = server.config(2000);
  rs_context_t* ctx = nullptr;
  CHECK(rs_connect(&c, &ctx) == RS_PROTOCOL_ERROR);
  CHECK(contains(rs_last_error(), "verification"));
}

TEST_CASE("a server that hangs up or stays silent fails with RS_CLOSED") {
  SUBCASE("hangs up") {
    OneShotServer server([](int) {});
    const rs_config_t c = server.config(2000);
    rs_context_t* ctx = nullptr;
    CHECK(rs_connect(&c, &ctx) == RS_CLOSED);
    CHECK(contains(rs_last_error(), "no answer to the hello"));
  }
  SUBCASE("stays silent") {
    OneShotServer server([](int fd) { drain(fd); });
    const rs_config_t c = server.config(100);
    rs_context_t* ctx = nullptr;
    CHECK(rs_connect(&c, &ctx) == RS_CLOSED);
    CHECK(contains(rs_last_error(), "did not answer the hello"));
  }
}

TEST_CASE("the hello carries the job, rank, size and pid") {
  FakeDaemon daemon;
  rs_config_t c = daemon.config(2, 5);
  c.job_id = "resnet";
  rs_context_t* ctx = nullptr;
  REQUIRE(rs_connect(&c, &ctx) == RS_SUCCESS);
  CHECK(daemon.hello().job_id == "resnet");
  CHECK(daemon.hello().local_rank == 2);
  CHECK(daemon.hello().local_size == 5);
  CHECK(daemon.hello().pid == getpid());
  CHECK(daemon.hello().protocol_version == ringsync::wire::kProtocolVersion);
  CHECK(rs_local_rank(ctx) == 2);
  CHECK(rs_local_size(ctx) == 5);
  rs_disconnect(ctx);
}

TEST_CASE("the daemon's refusal of the hello is rs_connect's status and message") {
  FakeDaemon::Options options;
  options.hello_status = Status::InvalidArgument("local rank 0 of job 'test' is already connected");
  FakeDaemon daemon(options);
  const rs_config_t c = daemon.config();
  rs_context_t* ctx = nullptr;
  CHECK(rs_connect(&c, &ctx) == RS_INVALID_ARGUMENT);
  CHECK(ctx == nullptr);
  CHECK(std::string(rs_last_error()) == "local rank 0 of job 'test' is already connected");
}

TEST_CASE("a daemon of another protocol version is refused") {
  FakeDaemon::Options options;
  options.protocol_version = ringsync::wire::kProtocolVersion + 1;
  FakeDaemon daemon(options);
  const rs_config_t c = daemon.config();
  rs_context_t* ctx = nullptr;
  CHECK(rs_connect(&c, &ctx) == RS_PROTOCOL_ERROR);
  CHECK(contains(rs_last_error(), "speaks protocol version"));
}

}  // namespace test_client_connect
