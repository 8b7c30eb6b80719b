// common/http_get.h against a real socket: a one-shot server on loopback that
// answers with a canned response (Prometheus's API answers large results in
// chunks).
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "common/http_get.h"

namespace test_common_http_get {

namespace {

// Accepts one connection on 127.0.0.1, reads the request, writes `response`, closes.
class OneShotServer {
 public:
  explicit OneShotServer(std::string response) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    REQUIRE(::listen(fd_, 1) == 0);
    socklen_t len = sizeof(addr);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this, response = std::move(response)] {
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      char buf[4096];
      (void)::recv(c, buf, sizeof(buf), 0);
      (void)::send(c, response.data(), response.size(), MSG_NOSIGNAL);
      ::close(c);
    });
  }
  ~OneShotServer() {
    thread_.join();
    ::close(fd_);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace

TEST_CASE("http_get reads a plain body and joins a chunked one") {
  {
    OneShotServer server("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello");
    auto r = ringsync::http_get(server.address(), "/x");
    REQUIRE(r.ok());
    CHECK(r->status == 200);
    CHECK(r->body == "hello");
  }
  {
    OneShotServer server(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\na\r\n\"0123456\"}\r\n0\r\n\r\n");
    auto r = ringsync::http_get(server.address(), "/api");
    REQUIRE(r.ok());
    CHECK(r->body == "{\"a\":\"0123456\"}");
  }
  {  // cut inside a chunk: an error, not a half body
    OneShotServer server("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n20\r\nshort");
    auto r = ringsync::http_get(server.address(), "/api");
    REQUIRE(!r.ok());
    CHECK(r.status().message().find("chunk") != std::string::npos);
  }
}

}  // namespace test_common_http_get
