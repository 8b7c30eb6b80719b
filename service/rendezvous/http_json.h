// One JSON request over HTTP/1.1 to the first of several endpoints that
// answers (etcd's gRPC gateway: POST /v3/kv/range and friends), on the
// control thread, never longer than a deadline. Boost.Beast; no TLS.
#pragma once

#include <utility>  // Asio 1.18 needs std::exchange declared first

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"

namespace ringsync::service::rendezvous {

struct HttpEndpoint {
  std::string host;
  std::uint16_t port = 0;
  std::string text() const;  // "host:port"
};

// POSTs `body` to `path` on each endpoint in turn until one answers with a
// JSON body, each try bounded by `timeout`. An answer with an HTTP error
// status is an error carrying the server's message; so is a failure of
// every endpoint (the last one's error, naming all endpoints).
boost::asio::awaitable<Result<nlohmann::json>> post_json(const std::vector<HttpEndpoint>& endpoints,
                                                         const std::string& path, const nlohmann::json& body,
                                                         std::chrono::nanoseconds timeout);

}  // namespace ringsync::service::rendezvous
