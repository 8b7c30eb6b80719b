#include "service/rendezvous/http_json.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "common/units.h"

namespace ringsync::service::rendezvous {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;

std::string HttpEndpoint::text() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

namespace {

asio::awaitable<Result<nlohmann::json>> post_one(const HttpEndpoint& endpoint, const std::string& path,
                                                 const std::string& body, std::chrono::nanoseconds timeout) {
  auto ex = co_await asio::this_coro::executor;
  const std::string where = endpoint.text();
  const auto timed_out = [&](const char* step) {
    return Status::Timeout(where + " did not answer within " + units::format_seconds(timeout) + " (" + step + ")");
  };
  boost::system::error_code ec;
  tcp::resolver resolver(ex);
  auto found = co_await resolver.async_resolve(endpoint.host, std::to_string(endpoint.port),
                                               asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return Status::Closed("cannot resolve " + where + ": " + ec.message());
  beast::tcp_stream stream(ex);
  stream.expires_after(timeout);
  co_await stream.async_connect(found, asio::redirect_error(asio::use_awaitable, ec));
  if (ec == beast::error::timeout) co_return timed_out("connect");
  if (ec) co_return Status::Closed("cannot connect to " + where + ": " + ec.message());
  http::request<http::string_body> request{http::verb::post, path, 11};
  request.set(http::field::host, where);
  request.set(http::field::content_type, "application/json");
  request.body() = body;
  request.prepare_payload();
  co_await http::async_write(stream, request, asio::redirect_error(asio::use_awaitable, ec));
  if (ec == beast::error::timeout) co_return timed_out("sending the request");
  if (ec) co_return Status::Closed("sending to " + where + " failed: " + ec.message());
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(16 * 1024 * 1024);
  co_await http::async_read(stream, buffer, parser, asio::redirect_error(asio::use_awaitable, ec));
  if (ec == beast::error::timeout) co_return timed_out("reading the answer");
  if (ec) co_return Status::Closed("reading the answer of " + where + " failed: " + ec.message());
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  const auto& response = parser.get();
  nlohmann::json json = nlohmann::json::parse(response.body(), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded())
    co_return Status::ProtocolError(where + path + " answered HTTP " + std::to_string(response.result_int()) +
                                    " with something that is not JSON");
  if (response.result() != http::status::ok) {
    std::string message = json.value("message", json.value("error", std::string("no message")));
    co_return Status::InvalidArgument(where + path + " answered HTTP " + std::to_string(response.result_int()) +
                                      ": " + message);
  }
  co_return json;
}

}  // namespace

asio::awaitable<Result<nlohmann::json>> post_json(const std::vector<HttpEndpoint>& endpoints, const std::string& path,
                                                  const nlohmann::json& body, std::chrono::nanoseconds timeout) {
  const std::string text = body.dump();
  Status last = Status::InvalidArgument("no endpoints");
  for (const auto& endpoint : endpoints) {
    auto answer = co_await post_one(endpoint, path, text, timeout);
    // An answer, even an error one, comes from a working server: no other
    // endpoint would say otherwise.
    if (answer.ok() || answer.status().code() == StatusCode::kInvalidArgument ||
        answer.status().code() == StatusCode::kProtocolError)
      co_return answer;
    last = answer.status();
  }
  co_return last;
}

}  // namespace ringsync::service::rendezvous
