#include "cli/top/scrape.h"

#include <memory>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "common/units.h"
#include "common/version.h"

namespace ringsync::cli::top {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kBodyLimit = 64u << 20;

// GET target.path; the body of a 200 answer.
asio::awaitable<Result<std::string>> fetch(Target target, std::chrono::nanoseconds timeout) {
  auto ex = co_await asio::this_coro::executor;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(timeout);
  const auto late = [&](const char* step) {
    return Status::Timeout(std::string("no answer within ") + units::format_seconds(timeout) + " (" + step + ")");
  };
  boost::system::error_code ec;

  // The resolver has no deadline of its own: a timer cancels it (the handler
  // shares the resolver, whichever of the two ends first).
  auto resolver = std::make_shared<tcp::resolver>(ex);
  asio::steady_timer guard(ex, deadline);
  guard.async_wait([resolver](boost::system::error_code e) {
    if (!e) resolver->cancel();
  });
  const auto found = co_await resolver->async_resolve(target.host, std::to_string(target.port),
                                                      asio::redirect_error(asio::use_awaitable, ec));
  guard.cancel();
  if (ec == asio::error::operation_aborted) co_return late("resolving the host");
  if (ec) co_return Status::Closed("cannot resolve " + target.host + ": " + ec.message());

  beast::tcp_stream stream(ex);
  stream.expires_at(deadline);
  co_await stream.async_connect(found, asio::redirect_error(asio::use_awaitable, ec));
  if (ec == beast::error::timeout) co_return late("connecting");
  if (ec) co_return Status::Closed("cannot connect: " + ec.message());

  http::request<http::empty_body> request{http::verb::get, target.path, 11};
  request.set(http::field::host, target.instance());
  request.set(http::field::user_agent, std::string("ringsync-top/") + kVersion);
  request.set(http::field::accept, target.path == "/debug/inflight" ? "application/json" : "text/plain");
  request.set(http::field::connection, "close");
  co_await http::async_write(stream, request, asio::redirect_error(asio::use_awaitable, ec));
  if (ec == beast::error::timeout) co_return late("sending the request");
  if (ec) co_return Status::Closed("sending the request failed: " + ec.message());

  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(kBodyLimit);
  co_await http::async_read(stream, buffer, parser, asio::redirect_error(asio::use_awaitable, ec));
  if (ec == beast::error::timeout) co_return late("reading the answer");
  if (ec) co_return Status::Closed("reading the answer failed: " + ec.message());
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  auto& response = parser.get();
  if (response.result() != http::status::ok)
    co_return Status::ProtocolError(target.path + " answered HTTP " + std::to_string(response.result_int()) + " " +
                                    std::string(response.reason()));
  co_return std::move(response.body());
}

asio::awaitable<Scrape> scrape_one(Target target, std::chrono::nanoseconds timeout) {
  Scrape scrape;
  scrape.instance = target.instance();
  auto body = co_await fetch(target, timeout);
  scrape.at = Clock::now();
  if (!body.ok()) {
    scrape.samples = body.status();
    co_return scrape;
  }
  auto samples = metrics::parse_text(*body);
  if (samples.ok())
    scrape.samples = std::move(samples);
  else
    scrape.samples = Status::ProtocolError(target.path + " is not Prometheus text: " + samples.status().message());
  Target in_flight = target;
  in_flight.path = "/debug/inflight";
  scrape.in_flight = co_await fetch(in_flight, timeout);
  co_return scrape;
}

// What the parallel scrapes share with the waiting coroutine.
struct Gather {
  explicit Gather(asio::any_io_executor ex, std::size_t n) : results(n), remaining(n), all_done(ex) {}
  std::vector<Scrape> results;
  std::size_t remaining;
  asio::steady_timer all_done;  // waited on until the last scrape cancels it
};

}  // namespace

asio::awaitable<std::vector<Scrape>> scrape_all(std::vector<Target> targets, std::chrono::nanoseconds timeout) {
  auto ex = co_await asio::this_coro::executor;
  auto gather = std::make_shared<Gather>(ex, targets.size());
  for (std::size_t i = 0; i < targets.size(); ++i) {
    asio::co_spawn(ex, scrape_one(targets[i], timeout),
                   [gather, i, instance = targets[i].instance()](std::exception_ptr error, Scrape scrape) {
                     if (error) {
                       scrape.instance = instance;
                       scrape.at = Clock::now();
                       scrape.samples = Status::Internal("reading its metrics failed unexpectedly");
                     }
                     gather->results[i] = std::move(scrape);
                     if (--gather->remaining == 0) gather->all_done.cancel();
                   });
  }
  if (gather->remaining > 0) {
    gather->all_done.expires_at(asio::steady_timer::time_point::max());
    boost::system::error_code ec;
    co_await gather->all_done.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  co_return std::move(gather->results);
}

}  // namespace ringsync::cli::top
