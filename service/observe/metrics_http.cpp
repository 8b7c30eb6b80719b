#include "service/observe/metrics_http.h"

#include <algorithm>
#include <list>
#include <optional>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>

#include "common/units.h"
#include "service/observe/http_answer.h"

namespace ringsync::service::observe {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;

namespace detail {

struct MetricsServerState {
  MetricsServerState(tcp::acceptor acceptor, std::function<std::string()> render, MetricsServerOptions options)
      : acceptor(std::move(acceptor)), render(std::move(render)), options(options) {}

  tcp::acceptor acceptor;
  tcp::endpoint endpoint;
  std::function<std::string()> render;
  MetricsServerOptions options;
  bool stopped = false;
  std::list<beast::tcp_stream*> connections;  // open ones, so that stop() can close them
};

}  // namespace detail

namespace {

using State = detail::MetricsServerState;
using Response = http_answer::Response;

constexpr std::size_t kLingerBytes = 64 * 1024;         // unread input drained before closing
constexpr auto kLingerLimit = std::chrono::seconds(2);  // and for at most this long
constexpr auto kAcceptRetryDelay = std::chrono::milliseconds(100);

// Half-closes, then reads and discards what the client still sends (bounded),
// so that closing does not reset the connection before it has read our answer.
asio::awaitable<void> close_after_answer(beast::tcp_stream& stream, const State& state) {
  error_code ec;
  stream.socket().shutdown(tcp::socket::shutdown_send, ec);
  if (ec) co_return;
  stream.expires_after(std::min<std::chrono::steady_clock::duration>(state.options.idle_timeout, kLingerLimit));
  char scratch[4096];
  for (std::size_t drained = 0; drained < kLingerBytes && !state.stopped;) {
    drained += co_await stream.async_read_some(asio::buffer(scratch), asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;
  }
}

asio::awaitable<void> serve_connection(std::shared_ptr<State> state, tcp::socket socket) {
  beast::tcp_stream stream(std::move(socket));
  if (state->connections.size() >= state->options.max_connections) co_return;  // closes it
  const auto registered = state->connections.insert(state->connections.end(), &stream);
  struct Unregister {
    State& state;
    std::list<beast::tcp_stream*>::iterator it;
    ~Unregister() { state.connections.erase(it); }
  } unregister{*state, registered};

  beast::flat_buffer buffer(http_answer::kReadAhead);
  for (;;) {
    http_answer::Parser parser;
    http_answer::limit_parser(parser, state->options);
    error_code ec;
    stream.expires_after(state->options.idle_timeout);
    co_await http::async_read(stream, buffer, parser, asio::redirect_error(asio::use_awaitable, ec));
    if (state->stopped) co_return;
    if (ec) {
      std::optional<Response> answer = http_answer::rejection(ec);
      if (!answer) co_return;  // closed, reset or idle too long: nothing to say
      stream.expires_after(state->options.idle_timeout);
      co_await http::async_write(stream, *answer, asio::redirect_error(asio::use_awaitable, ec));
      if (!ec && !state->stopped) co_await close_after_answer(stream, *state);
      co_return;
    }

    Response res = http_answer::respond(state->options, state->render, parser.get());
    stream.expires_after(state->options.idle_timeout);
    co_await http::async_write(stream, res, asio::redirect_error(asio::use_awaitable, ec));
    if (ec || state->stopped) co_return;
    if (!res.keep_alive()) {
      co_await close_after_answer(stream, *state);
      co_return;
    }
  }
}

asio::awaitable<void> accept_connections(std::shared_ptr<State> state) {
  for (;;) {
    error_code ec;
    tcp::socket socket = co_await state->acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (state->stopped || ec == asio::error::operation_aborted) co_return;
    if (ec) {
      // Out of file descriptors, or a client gone before accept: keep serving.
      asio::steady_timer pause(state->acceptor.get_executor(), kAcceptRetryDelay);
      co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      if (state->stopped) co_return;
      continue;
    }
    asio::co_spawn(state->acceptor.get_executor(), serve_connection(state, std::move(socket)), asio::detached);
  }
}

std::string lower_first(std::string s) {
  if (!s.empty() && s[0] >= 'A' && s[0] <= 'Z') s[0] = static_cast<char>(s[0] - 'A' + 'a');
  return s;
}

Result<tcp::endpoint> resolve_listen_address(asio::io_context& io, std::string_view address, const std::string& flag) {
  const std::string shown(address);
  auto parsed = units::parse_address(address);
  if (!parsed.ok() || !parsed->has_value()) {
    const std::string why = parsed.ok() ? "no address given" : parsed.status().message();
    return Status::InvalidArgument("invalid " + flag + " '" + shown + "': " + why + "; set " + flag +
                                   " to HOST:PORT, e.g. 127.0.0.1:9400 or [::1]:9400");
  }
  const units::Address& a = **parsed;
  error_code ec;
  const asio::ip::address ip = asio::ip::make_address(a.host, ec);
  if (!ec) return tcp::endpoint(ip, a.port);
  tcp::resolver resolver(io);
  const auto results = resolver.resolve(a.host, std::to_string(a.port),
                                        tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || results.empty()) {
    return Status::InvalidArgument("cannot resolve the host '" + a.host + "' of " + flag + " '" + shown +
                                   "': " + lower_first(ec ? ec.message() : "no addresses") + "; set " + flag +
                                   " to an IP address and port, e.g. 127.0.0.1:9400");
  }
  return results.begin()->endpoint();
}

}  // namespace

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(asio::io_context& io, std::string_view address,
                                                            std::function<std::string()> render,
                                                            MetricsServerOptions options) {
  if (!render) return Status::InvalidArgument("metrics server needs a render function");
  if (options.idle_timeout <= std::chrono::steady_clock::duration::zero() || options.header_limit == 0 ||
      options.max_connections == 0) {
    return Status::InvalidArgument("metrics server options: idle_timeout, header_limit and max_connections "
                                   "must be positive");
  }
  auto endpoint = resolve_listen_address(io, address, options.flag);
  if (!endpoint.ok()) return endpoint.status();

  tcp::acceptor acceptor(io);
  error_code ec;
  auto fail = [&] {
    return Status::InvalidArgument("cannot listen on " + std::string(address) + ": " + lower_first(ec.message()) +
                                   "; set " + options.flag + " to a free HOST:PORT" +
                                   (options.flag == "--metrics-address" ? ", or to off" : ""));
  };
  if (acceptor.open(endpoint->protocol(), ec); ec) return fail();
  // Lets a restarted daemon rebind while old connections sit in TIME_WAIT; on
  // Linux it does not allow two listeners on one port.
  if (acceptor.set_option(asio::socket_base::reuse_address(true), ec); ec) return fail();
  if (acceptor.bind(*endpoint, ec); ec) return fail();
  if (acceptor.listen(asio::socket_base::max_listen_connections, ec); ec) return fail();
  const tcp::endpoint bound = acceptor.local_endpoint(ec);
  if (ec) return fail();

  auto state = std::make_shared<State>(std::move(acceptor), std::move(render), options);
  state->endpoint = bound;
  asio::co_spawn(io, accept_connections(state), asio::detached);
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(state)));
}

tcp::endpoint MetricsServer::endpoint() const { return state_->endpoint; }

void MetricsServer::stop() {
  if (state_->stopped) return;
  state_->stopped = true;
  error_code ec;
  state_->acceptor.close(ec);
  for (beast::tcp_stream* stream : state_->connections) {
    stream->socket().shutdown(tcp::socket::shutdown_both, ec);
    stream->close();
  }
}

MetricsServer::~MetricsServer() { stop(); }

}  // namespace ringsync::service::observe
