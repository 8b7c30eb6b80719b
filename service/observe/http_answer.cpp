#include "service/observe/http_answer.h"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/metrics.h"

namespace ringsync::service::observe::http_answer {

namespace beast = boost::beast;
namespace http = beast::http;
using boost::system::error_code;

namespace {

constexpr std::string_view kIndexPage =
    "<html><head><title>ringsyncd</title></head><body>\n"
    "<h1>ringsyncd</h1>\n"
    "<p><a href=\"/metrics\">Metrics</a> (Prometheus text format)</p>\n"
    "<p><a href=\"/healthz\">Alive</a> and <a href=\"/readyz\">ready</a></p>\n"
    "<p><a href=\"/debug/inflight\">What each in-flight operation waits for</a> (JSON)</p>\n"
    "</body></html>\n";

Response make_response(http::status status, unsigned version, bool keep_alive, std::string_view content_type,
                       std::string body) {
  Response res{status, version};
  res.set(http::field::server, "ringsyncd");
  res.set(http::field::content_type, beast::string_view(content_type.data(), content_type.size()));
  res.keep_alive(keep_alive);
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

// The response with its body; respond() drops the body for HEAD.
Response answer(const MetricsServerOptions& options, const std::function<std::string()>& render,
                const Request& req) {
  const unsigned version = req.version();
  const bool keep_alive = req.keep_alive();
  const beast::string_view target = req.target();
  std::string_view path(target.data(), target.size());
  path = path.substr(0, path.find('?'));
  constexpr std::string_view kText = "text/plain; charset=utf-8";

  if (options.post && path.rfind("/v3/", 0) == 0) {
    if (req.method() != http::verb::post) {
      Response res = make_response(http::status::method_not_allowed, version, keep_alive, kText,
                                   "method " + req.method_string().to_string() + " not allowed; use POST\n");
      res.set(http::field::allow, "POST");
      return res;
    }
    auto answer = options.post(path, req.body());
    if (answer.ok()) return make_response(http::status::ok, version, keep_alive, "application/json", *answer);
    // etcd's gateway error object: {"error", "code" (gRPC's InvalidArgument), "message"}.
    const std::string& why = answer.status().message();
    const nlohmann::json error = {{"error", why}, {"code", 3}, {"message", why}};
    return make_response(http::status::bad_request, version, keep_alive, "application/json",
                         error.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  const bool in_flight = path == "/debug/inflight" && options.in_flight;
  if (path != "/metrics" && path != "/" && path != "/healthz" && path != "/readyz" && !in_flight) {
    return make_response(http::status::not_found, version, keep_alive, kText,
                         "not found; metrics are at /metrics\n");
  }
  const bool head = req.method() == http::verb::head;
  if (req.method() != http::verb::get && !head) {
    Response res = make_response(http::status::method_not_allowed, version, keep_alive, kText,
                                 "method " + req.method_string().to_string() + " not allowed; use GET or HEAD\n");
    res.set(http::field::allow, "GET, HEAD");
    return res;
  }

  Response res;
  if (path == "/metrics") {
    try {
      res = make_response(http::status::ok, version, keep_alive, metrics::kContentType, render());
    } catch (const std::exception& e) {
      res = make_response(http::status::internal_server_error, version, keep_alive, kText,
                          std::string("cannot render metrics: ") + e.what() + "\n");
    }
  } else if (in_flight) {
    try {
      res = make_response(http::status::ok, version, keep_alive, "application/json", options.in_flight());
    } catch (const std::exception& e) {
      res = make_response(http::status::internal_server_error, version, keep_alive, kText,
                          std::string("cannot render the in-flight view: ") + e.what() + "\n");
    }
  } else if (path == "/healthz") {
    res = make_response(http::status::ok, version, keep_alive, kText, "ok\n");
  } else if (path == "/readyz") {
    const std::string why = options.not_ready ? options.not_ready() : std::string();
    res = why.empty() ? make_response(http::status::ok, version, keep_alive, kText, "ready\n")
                      : make_response(http::status::service_unavailable, version, keep_alive, kText,
                                      "not ready: " + why + "\n");
  } else {
    res = make_response(http::status::ok, version, keep_alive, "text/html; charset=utf-8", std::string(kIndexPage));
  }
  return res;
}

}  // namespace

Response respond(const MetricsServerOptions& options, const std::function<std::string()>& render,
                 const Request& request) {
  Response res = answer(options, render, request);
  // HEAD: the headers (Content-Length included) without the body, whatever the
  // status: a body the client does not expect would read as the next response.
  if (request.method() == http::verb::head) res.body().clear();
  return res;
}

void limit_parser(Parser& parser, const MetricsServerOptions& options) {
  parser.header_limit(static_cast<std::uint32_t>(std::min<std::size_t>(options.header_limit, UINT32_MAX)));
  parser.body_limit(options.body_limit);
}

std::optional<Response> rejection(const error_code& ec) {
  if (ec.category() != http::make_error_code(http::error::bad_method).category()) return std::nullopt;
  if (ec == http::error::end_of_stream || ec == http::error::partial_message) return std::nullopt;
  constexpr std::string_view kText = "text/plain; charset=utf-8";
  if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
    return make_response(http::status::request_header_fields_too_large, 11, false, kText,
                         "request header too large\n");
  }
  if (ec == http::error::body_limit) {
    return make_response(http::status::payload_too_large, 11, false, kText, "request body too large\n");
  }
  return make_response(http::status::bad_request, 11, false, kText, "malformed request: " + ec.message() + "\n");
}

}  // namespace ringsync::service::observe::http_answer
