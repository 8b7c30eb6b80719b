// What the daemon's HTTP endpoint answers, without sockets: a parsed request
// to its response (respond), a request the parser refused to its 4xx answer
// (rejection), and the parser's limits (limit_parser). The server
// (metrics_http.cpp) reads and writes; its fuzzer (fuzz/http_request.cpp)
// feeds these the same way from bytes in memory.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>

#include <boost/beast/http.hpp>

#include "service/observe/metrics_http.h"

namespace ringsync::service::observe::http_answer {

using Request = boost::beast::http::request<boost::beast::http::string_body>;
using Response = boost::beast::http::response<boost::beast::http::string_body>;
using Parser = boost::beast::http::request_parser<boost::beast::http::string_body>;

// Bytes read ahead on one connection (the read buffer's limit).
inline constexpr std::size_t kReadAhead = 64 * 1024;

// Applies the options' header and body limits to a fresh parser.
void limit_parser(Parser& parser, const MetricsServerOptions& options);

// The answer to one complete request. render gives the body of /metrics; its
// exceptions become a 500.
Response respond(const MetricsServerOptions& options, const std::function<std::string()>& render,
                 const Request& request);

// The answer to a request the parser refused (400, 413 or 431, closing), or
// nothing if the connection itself failed (reset, end of stream, timeout) and
// there is no one to answer.
std::optional<Response> rejection(const boost::system::error_code& ec);

}  // namespace ringsync::service::observe::http_answer
