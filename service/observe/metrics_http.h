// The daemon's HTTP endpoint for Prometheus: GET /metrics (and HEAD), / with a
// link to it, /healthz (alive: 200 while the daemon's loop answers) and /readyz
// (ready: 200, or 503 with the reason, for readiness probes), /debug/inflight
// (JSON: what each in-flight operation waits for); optionally POST
// /v3/... for the rendezvous store a daemon can serve (options.post). HTTP/1.1 with keep-alive, one coroutine per connection,
// on the caller's io_context.
//
// Requests are bounded: header size (431 and close), body size (413 and close),
// malformed requests (400 and close), and a client that sends nothing or too
// slowly is disconnected once idle_timeout passes without a complete request.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "common/status.h"

namespace ringsync::service::observe {

namespace detail {
struct MetricsServerState;  // shared with the connection coroutines, which may outlive the server
}

struct MetricsServerOptions {
  // Time a connection may take to deliver a complete request (or to accept a
  // response) before it is closed.
  std::chrono::steady_clock::duration idle_timeout = std::chrono::seconds(30);
  // Largest request header (request line + fields) accepted.
  std::size_t header_limit = 8 * 1024;
  // Connections over this many are closed at once.
  std::size_t max_connections = 64;
  // Why the daemon is not ready yet ("" when it is), for /readyz; unset: always ready.
  std::function<std::string()> not_ready;
  // The JSON of GET /debug/inflight (what every operation waits for); unset: 404.
  std::function<std::string()> in_flight;
  // POST /v3/... with a JSON body of at most body_limit bytes (the rendezvous
  // store a daemon may serve, rendezvous/served_store.h): the handler's JSON
  // answer, or its error as HTTP 400 with etcd's error object. Unset: 404.
  std::function<Result<std::string>(std::string_view path, const std::string& body)> post;
  std::size_t body_limit = 8 * 1024;
  // The setting that gave the address, for messages.
  std::string flag = "--metrics-address";
};

class MetricsServer {
 public:
  // address: "HOST:PORT"; HOST is an IPv4 address, an IPv6 address in brackets
  // ("[::1]:9400") or a host name resolved once here; port 0 picks a free port.
  // render produces the body of /metrics (text format 0.0.4) and must not be
  // empty. Binding happens here, so errors (bad address, port in use) come back
  // as a Status that says which address and what to change.
  //
  // The server lives on `io`, which must be run by a single thread; stop() and
  // the destructor must be called from that thread (or while it is not running),
  // and before `io` is destroyed.
  static Result<std::unique_ptr<MetricsServer>> start(boost::asio::io_context& io, std::string_view address,
                                                      std::function<std::string()> render,
                                                      MetricsServerOptions options = {});

  // The bound endpoint (the actual port when 0 was asked for).
  boost::asio::ip::tcp::endpoint endpoint() const;
  // Closes the listener and every open connection. Safe to call twice.
  void stop();
  ~MetricsServer();

  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

 private:
  explicit MetricsServer(std::shared_ptr<detail::MetricsServerState> state) : state_(std::move(state)) {}
  std::shared_ptr<detail::MetricsServerState> state_;
};

}  // namespace ringsync::service::observe
