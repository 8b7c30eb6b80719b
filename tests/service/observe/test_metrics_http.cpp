#include "service/observe/metrics_http.h"

#include <doctest/doctest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>

#include <boost/asio/post.hpp>

#include "common/metrics.h"

namespace test_service_observe_metrics_http {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using ringsync::StatusCode;
using ringsync::service::observe::MetricsServer;
using ringsync::service::observe::MetricsServerOptions;

namespace {

constexpr const char* kBody = "# HELP ringsync_clients Connected trainers.\n# TYPE ringsync_clients gauge\nringsync_clients 2\n";

// A server on 127.0.0.1:0 whose io_context runs on its own thread, as in the
// daemon. Stopping posts stop() to that thread; joining proves every
// connection coroutine finished.
struct Server {
  explicit Server(MetricsServerOptions options = {}, std::function<std::string()> render = {}) {
    if (!render) render = [this] {
      ++renders;
      return std::string(kBody);
    };
    auto started = MetricsServer::start(io, "127.0.0.1:0", std::move(render), options);
    REQUIRE_MESSAGE(started.ok(), started.status().to_string());
    server = std::move(started).value();
    thread = std::thread([this] { io.run(); });
  }
  ~Server() { stop(); }
  void stop() {
    if (!thread.joinable()) return;
    asio::post(io, [this] { server->stop(); });
    thread.join();
  }
  tcp::endpoint endpoint() const { return server->endpoint(); }

  asio::io_context io;
  std::unique_ptr<MetricsServer> server;
  std::thread thread;
  std::atomic<int> renders{0};
};

struct Response {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
};

// A plain-socket HTTP client, independent of the server's HTTP library. Reads
// give up after a generous receive timeout so that a broken server fails the
// test instead of hanging it.
class Client {
 public:
  explicit Client(const tcp::endpoint& ep) {
    fd_ = ::socket(ep.protocol().family(), SOCK_STREAM, 0);
    REQUIRE(fd_ >= 0);
    timeval tv{20, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    REQUIRE(::connect(fd_, ep.data(), static_cast<socklen_t>(ep.size())) == 0);
  }
  ~Client() { ::close(fd_); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  void send(std::string_view raw) {
    while (!raw.empty()) {
      const ssize_t n = ::send(fd_, raw.data(), raw.size(), MSG_NOSIGNAL);
      REQUIRE(n > 0);
      raw.remove_prefix(static_cast<std::size_t>(n));
    }
  }

  // Sends `raw` and reads one response, which must come. HEAD responses have no body.
  Response request(std::string_view raw, bool head = false) {
    send(raw);
    return read_response(head);
  }

  Response read_response(bool head = false) {
    std::size_t end;
    while ((end = pending_.find("\r\n\r\n")) == std::string::npos) REQUIRE_MESSAGE(fill(), "no response header");
    Response res;
    const std::string header = pending_.substr(0, end);
    pending_.erase(0, end + 4);
    std::size_t line_end = header.find("\r\n");
    const std::string status_line = header.substr(0, line_end);
    REQUIRE(status_line.rfind("HTTP/1.", 0) == 0);
    res.status = std::stoi(status_line.substr(9, 3));
    while (line_end != std::string::npos) {
      const std::size_t start = line_end + 2;
      line_end = header.find("\r\n", start);
      const std::string line = header.substr(start, line_end == std::string::npos ? std::string::npos : line_end - start);
      const std::size_t colon = line.find(':');
      REQUIRE(colon != std::string::npos);
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      res.headers[name] = line.substr(line.find_first_not_of(' ', colon + 1));
    }
    const std::size_t length = head ? 0 : std::stoul(res.headers.at("content-length"));
    while (pending_.size() < length) REQUIRE_MESSAGE(fill(), "response body cut short");
    res.body = pending_.substr(0, length);
    pending_.erase(0, length);
    return res;
  }

  // True once the server has closed the connection (EOF or reset), after any
  // bytes still in flight; false if the receive timeout passed first.
  bool closed_by_server() {
    for (;;) {
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n == 0) return true;
      if (n < 0) return errno == ECONNRESET;
    }
  }

 private:
  bool fill() {
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) return false;
    pending_.append(buf, static_cast<std::size_t>(n));
    return true;
  }

  int fd_ = -1;
  std::string pending_;
};

std::string get(std::string_view target, std::string_view extra_headers = "") {
  return "GET " + std::string(target) + " HTTP/1.1\r\nHost: test\r\n" + std::string(extra_headers) + "\r\n";
}

}  // namespace

TEST_CASE("GET /metrics serves the rendered text with the exposition content type") {
  Server s;
  CHECK(s.endpoint().address().to_string() == "127.0.0.1");
  CHECK(s.endpoint().port() != 0);
  Client c(s.endpoint());
  const auto res = c.request(get("/metrics"));
  CHECK(res.status == 200);
  CHECK(res.headers.at("content-type") == ringsync::metrics::kContentType);
  CHECK(res.headers.at("content-length") == std::to_string(std::strlen(kBody)));
  CHECK(res.body == kBody);
  CHECK(s.renders == 1);
}

TEST_CASE("HEAD /metrics sends the headers of GET and no body") {
  Server s;
  Client c(s.endpoint());
  const auto head = c.request("HEAD /metrics HTTP/1.1\r\nHost: test\r\n\r\n", /*head=*/true);
  CHECK(head.status == 200);
  CHECK(head.headers.at("content-type") == ringsync::metrics::kContentType);
  CHECK(head.headers.at("content-length") == std::to_string(std::strlen(kBody)));
  // No body bytes followed: the next response on the connection starts cleanly.
  const auto next = c.request(get("/healthz"));
  CHECK(next.status == 200);
  CHECK(next.body == "ok\n");
}

TEST_CASE("HEAD of an unknown path: 404 without a body, the connection stays in step") {
  // Found by the fuzzer (fuzz/http_request.cpp): the 404's body went out after
  // a HEAD and read as the start of the next response.
  Server s;
  Client c(s.endpoint());
  const auto head = c.request("HEAD /nowhere HTTP/1.1\r\nHost: test\r\n\r\n", /*head=*/true);
  CHECK(head.status == 404);
  const auto next = c.request(get("/healthz"));
  CHECK(next.status == 200);
  CHECK(next.body == "ok\n");
}

TEST_CASE("index, health, query strings and unknown paths") {
  Server s;
  Client c(s.endpoint());
  auto res = c.request(get("/"));
  CHECK(res.status == 200);
  CHECK(res.headers.at("content-type").rfind("text/html", 0) == 0);
  CHECK(res.body.find("href=\"/metrics\"") != std::string::npos);

  res = c.request(get("/metrics?name[]=ringsync_clients"));
  CHECK(res.status == 200);
  CHECK(res.body == kBody);
  res = c.request(get("/metricsx"));
  CHECK(res.status == 404);
  res = c.request(get("/healthz"));
  CHECK(res.status == 200);
  CHECK(res.body == "ok\n");
}

TEST_CASE("/readyz answers 503 with the reason until the daemon is ready, then 200") {
  std::atomic<bool> formed{false};
  MetricsServerOptions options;
  options.not_ready = [&] { return formed ? std::string() : std::string("the ring of job 'a' is not formed"); };
  Server s(options);
  Client c(s.endpoint());
  auto res = c.request(get("/readyz"));
  CHECK(res.status == 503);
  CHECK(res.body == "not ready: the ring of job 'a' is not formed\n");
  CHECK(c.request(get("/healthz")).status == 200);  // alive all the same
  formed = true;
  res = c.request(get("/readyz"));
  CHECK(res.status == 200);
  CHECK(res.body == "ready\n");
}

TEST_CASE("/readyz without a readiness check is ready") {
  Server s;
  Client c(s.endpoint());
  CHECK(c.request(get("/readyz")).status == 200);
}

TEST_CASE("/debug/inflight serves the daemon's JSON view, 500 when it throws, 404 where there is none") {
  int calls = 0;
  MetricsServerOptions options;
  options.in_flight = [&]() -> std::string {
    if (++calls == 2) throw std::runtime_error("a bug");
    return "{\"jobs\": []}\n";
  };
  Server s(options);
  Client c(s.endpoint());
  auto res = c.request(get("/debug/inflight"));
  CHECK(res.status == 200);
  CHECK(res.headers.at("content-type") == "application/json");
  CHECK(res.body == "{\"jobs\": []}\n");
  res = c.request(get("/debug/inflight"));
  CHECK(res.status == 500);
  CHECK(res.body.find("a bug") != std::string::npos);
  CHECK(c.request(get("/debug/inflight?x=1")).status == 200);  // the server goes on
  CHECK(c.request(get("/metrics")).status == 200);

  Server plain;
  Client other(plain.endpoint());
  CHECK(other.request(get("/debug/inflight")).status == 404);
}

TEST_CASE("methods other than GET and HEAD get 405 with Allow, and the connection stays usable") {
  Server s;
  Client c(s.endpoint());
  auto res = c.request("POST /metrics HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\n\r\nhello");
  CHECK(res.status == 405);
  CHECK(res.headers.at("allow") == "GET, HEAD");
  res = c.request("DELETE /healthz HTTP/1.1\r\nHost: test\r\n\r\n");
  CHECK(res.status == 405);
  res = c.request(get("/metrics"));
  CHECK(res.status == 200);
  CHECK(s.renders == 1);
}

TEST_CASE("keep-alive: several requests on one connection, pipelined too; close when asked") {
  Server s;
  Client c(s.endpoint());
  for (int i = 0; i < 2; ++i) {
    const auto res = c.request(get("/metrics"));
    CHECK(res.status == 200);
    CHECK(res.body == kBody);
  }
  c.send(get("/metrics") + get("/healthz") + get("/metrics", "Connection: close\r\n"));
  const auto a = c.read_response();
  const auto b = c.read_response();
  const auto last = c.read_response();
  CHECK(a.body == kBody);
  CHECK(b.body == "ok\n");
  CHECK(last.body == kBody);
  CHECK(last.headers.at("connection") == "close");
  CHECK(c.closed_by_server());
  CHECK(s.renders == 4);

  Client old(s.endpoint());  // HTTP/1.0 without keep-alive: one response, then close
  CHECK(old.request("GET /healthz HTTP/1.0\r\n\r\n").status == 200);
  CHECK(old.closed_by_server());
}

TEST_CASE("garbage gets 400 and a close; the server keeps serving") {
  Server s;
  const std::string garbage_inputs[] = {
      std::string("\x00\x01\x02\xff\xfe binary\r\n\r\n", 17),
      "GET /metrics FTP/1.1\r\n\r\n",
      "GET /metrics HTTP/1.1\r\nno colon here\r\n\r\n",
      "GET /metrics HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
      "GET\r\n\r\n",
  };
  for (const std::string& garbage : garbage_inputs) {
    CAPTURE(garbage);
    Client bad(s.endpoint());
    CHECK(bad.request(garbage).status == 400);
    CHECK(bad.closed_by_server());
  }
  {
    Client rude(s.endpoint());  // half a request, then gone
    rude.send("GET /met");
  }
  Client c(s.endpoint());
  CHECK(c.request(get("/metrics")).status == 200);
}

TEST_CASE("oversized requests are refused and closed") {
  MetricsServerOptions options;
  options.header_limit = 1024;
  Server s(options);
  {
    Client c(s.endpoint());
    CHECK(c.request(get("/metrics", "X-Filler: " + std::string(4000, 'a') + "\r\n")).status == 431);
    CHECK(c.closed_by_server());
  }
  {
    Client c(s.endpoint());
    const std::string post = "POST /metrics HTTP/1.1\r\nHost: test\r\nContent-Length: 20000\r\n\r\n";
    CHECK(c.request(post + std::string(20000, 'x')).status == 413);
    CHECK(c.closed_by_server());
  }
  Client c(s.endpoint());
  CHECK(c.request(get("/metrics")).status == 200);
}

TEST_CASE("a client that sends nothing, or too little, is disconnected after the idle timeout") {
  MetricsServerOptions options;
  options.idle_timeout = std::chrono::seconds(1);
  Server s(options);
  Client silent(s.endpoint());
  Client slow(s.endpoint());
  slow.send("GET /metrics HTTP/1.1\r\n");
  Client served(s.endpoint());  // idle after one response
  CHECK(served.request(get("/healthz")).status == 200);

  CHECK(silent.closed_by_server());
  CHECK(slow.closed_by_server());
  CHECK(served.closed_by_server());
  CHECK(s.renders == 0);

  Client c(s.endpoint());
  CHECK(c.request(get("/metrics")).status == 200);
}

TEST_CASE("stop() closes the listener and open connections; calling it twice is fine") {
  Server s;
  const tcp::endpoint ep = s.endpoint();
  Client open(ep);
  CHECK(open.request(get("/healthz")).status == 200);
  s.stop();  // returns only once io.run() ran out of work: every coroutine ended
  CHECK(open.closed_by_server());
  s.server->stop();
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  CHECK(::connect(fd, ep.data(), static_cast<socklen_t>(ep.size())) != 0);  // nobody listens any more
  ::close(fd);
}

TEST_CASE("connections beyond max_connections are closed at once") {
  MetricsServerOptions options;
  options.max_connections = 1;
  Server s(options);
  Client first(s.endpoint());
  CHECK(first.request(get("/healthz")).status == 200);
  Client second(s.endpoint());
  CHECK(second.closed_by_server());
  CHECK(first.request(get("/metrics")).status == 200);
}

TEST_CASE("a failing render function gives 500 and the server survives") {
  std::atomic<bool> fail{true};
  Server s({}, [&fail]() -> std::string {
    if (fail) throw std::runtime_error("collector broke");
    return kBody;
  });
  Client c(s.endpoint());
  const auto res = c.request(get("/metrics"));
  CHECK(res.status == 500);
  CHECK(res.body.find("collector broke") != std::string::npos);
  fail = false;
  CHECK(c.request(get("/metrics")).status == 200);
}

TEST_CASE("IPv6 loopback in brackets, and host names") {
  asio::io_context io;
  auto by_name = MetricsServer::start(io, "localhost:0", [] { return std::string(kBody); });
  REQUIRE_MESSAGE(by_name.ok(), by_name.status().to_string());
  CHECK((*by_name)->endpoint().address().is_loopback());
  (*by_name)->stop();

  auto server = MetricsServer::start(io, "[::1]:0", [] { return std::string(kBody); });
  if (!server.ok()) {
    // Hosts without IPv6 still report why, clearly.
    CHECK(server.status().message().find("cannot listen on [::1]:0") == 0);
    return;
  }
  CHECK((*server)->endpoint().address().to_string() == "::1");
  std::thread t([&io] { io.run(); });
  {
    Client c((*server)->endpoint());
    CHECK(c.request(get("/metrics")).body == kBody);
  }
  asio::post(io, [&] { (*server)->stop(); });
  t.join();
}

TEST_CASE("bind errors and bad addresses are clear errors") {
  Server s;
  const std::string taken = "127.0.0.1:" + std::to_string(s.endpoint().port());
  asio::io_context io;
  const auto render = [] { return std::string(); };

  auto conflict = MetricsServer::start(io, taken, render);
  REQUIRE_FALSE(conflict.ok());
  CHECK(conflict.status().message() ==
        "cannot listen on " + taken + ": address already in use; set --metrics-address to a free HOST:PORT, or to off");

  for (const char* bad : {"nonsense", "127.0.0.1", "127.0.0.1:99999", "::1:9400", "", "off", "[::1:9400"}) {
    CAPTURE(bad);
    auto r = MetricsServer::start(io, bad, render);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == StatusCode::kInvalidArgument);
    CHECK(r.status().message().rfind(std::string("invalid --metrics-address '") + bad + "': ", 0) == 0);
    CHECK(r.status().message().find("--metrics-address") != std::string::npos);
  }

  auto unresolvable = MetricsServer::start(io, "no-such-host.invalid:9400", render);
  REQUIRE_FALSE(unresolvable.ok());
  CHECK(unresolvable.status().message().rfind("cannot resolve the host 'no-such-host.invalid' of --metrics-address", 0) == 0);

  auto not_local = MetricsServer::start(io, "192.0.2.1:0", render);  // TEST-NET-1: no interface has it
  REQUIRE_FALSE(not_local.ok());
  CHECK(not_local.status().message().rfind("cannot listen on 192.0.2.1:0: ", 0) == 0);

  auto no_render = MetricsServer::start(io, "127.0.0.1:0", {});
  REQUIRE_FALSE(no_render.ok());
  CHECK(no_render.status().message() == "metrics server needs a render function");
}

}  // namespace test_service_observe_metrics_http
