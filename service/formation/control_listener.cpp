#include "service/formation/control_listener.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/log.h"
#include "common/units.h"

namespace ringsync::service::formation {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

std::string seconds(std::chrono::nanoseconds d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(d).count()) + " s";
}

// Refuses a hello with `why` (the other daemon's join fails with it) and closes.
void refuse(const std::shared_ptr<PeerLink>& link, const std::string& why) {
  link->send(peer_wire::PeerHelloReply{false, why, 0, {}, 0});
  link->goodbye(Status::InvalidArgument(why));
}

}  // namespace

ControlListener::ControlListener(asio::io_context& io, Options options)
    : io_(io), options_(options), acceptor_(io) {}

ControlListener::~ControlListener() { close(); }

Result<std::unique_ptr<ControlListener>> ControlListener::open(asio::io_context& io, const std::string& where,
                                                               Options options) {
  auto address = units::parse_address(where);
  if (!address.ok() || !*address)
    return Status::InvalidArgument("control address '" + where + "': " +
                                   (address.ok() ? std::string("not an address") : address.status().message()) +
                                   " (--control-address)");
  boost::system::error_code ec;
  tcp::resolver resolver(io);
  auto endpoints = resolver.resolve((*address)->host, std::to_string((*address)->port), ec);
  if (ec || endpoints.empty())
    return Status::InvalidArgument("cannot resolve the control address " + where + ": " + ec.message() +
                                   " (--control-address)");
  std::unique_ptr<ControlListener> listener(new ControlListener(io, options));
  tcp::acceptor& acceptor = listener->acceptor_;
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return Status::InvalidArgument("cannot listen for the other nodes on " + where + ": " + ec.message() +
                                   " (--control-address)");
  listener->port_ = acceptor.local_endpoint(ec).port();
  const bool v6 = (*address)->host.find(':') != std::string::npos;
  listener->address_ = (v6 ? "[" + (*address)->host + "]" : (*address)->host) + ":" + std::to_string(listener->port_);
  asio::co_spawn(io, listener->accept_loop(listener->alive_), asio::detached);
  return listener;
}

void ControlListener::close() {
  if (closed_) return;
  closed_ = true;
  boost::system::error_code ec;
  acceptor_.close(ec);
  for (auto& [job, waiting] : parked_)
    for (auto& p : waiting)
      if (auto link = p.link.lock()) link->close(Status::Closed("ringsyncd is shutting down"));
  parked_.clear();
  parked_count_ = 0;
}

std::uint64_t ControlListener::route(const std::string& job_id, OnHello on_hello) {
  const std::uint64_t id = next_route_++;
  routes_[job_id] = Route{id, std::move(on_hello)};
  auto it = parked_.find(job_id);
  if (it == parked_.end()) return id;
  auto waiting = std::move(it->second);
  parked_.erase(it);
  parked_count_ -= waiting.size();
  for (auto& p : waiting) {
    auto link = p.link.lock();
    if (!link || link->closed()) continue;
    auto route = routes_.find(job_id);
    if (route == routes_.end() || route->second.id != id) break;  // the handler unrouted the job
    OnHello handler = route->second.on_hello;
    handler(link, p.hello);
  }
  return id;
}

void ControlListener::unroute(const std::string& job_id, std::uint64_t id) {
  auto it = routes_.find(job_id);
  if (it != routes_.end() && it->second.id == id) routes_.erase(it);
}

asio::awaitable<void> ControlListener::accept_loop(std::weak_ptr<int> alive) {
  // `alive` is a parameter: the body first runs when the loop does, maybe
  // after this listener is gone.
  while (!alive.expired() && !closed_) {
    boost::system::error_code ec;
    tcp::socket socket = co_await acceptor_.async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (alive.expired() || closed_) co_return;
    if (ec) {
      if (ec == asio::error::operation_aborted) co_return;
      // Out of descriptors: wait a little rather than spin.
      RS_LOG(warn, "ring") << "control port " << address_ << ": accept failed: " << ec.message();
      asio::steady_timer pause(io_, std::chrono::milliseconds(100));
      co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      continue;
    }
    const std::string peer = socket.remote_endpoint(ec).address().to_string();
    if (options_.tls)
      asio::co_spawn(io_, secure(std::move(socket), peer, alive), asio::detached);
    else
      greet(ControlStream(std::move(socket)), peer, alive);
  }
}

asio::awaitable<void> ControlListener::secure(tcp::socket socket, std::string peer, std::weak_ptr<int> alive) {
  // The handshake runs beside the accept loop: a slow or silent peer holds
  // only its own connection, and only up to the handshake timeout.
  if (alive.expired() || closed_) co_return;
  const std::shared_ptr<ControlTls> tls = options_.tls;
  auto stream = co_await ControlStream::secure(std::move(socket), *tls, ControlStream::Role::kAccepted,
                                               options_.handshake_timeout);
  if (alive.expired() || closed_) co_return;
  if (!stream.ok()) {
    if (options_.on_tls_refusal) options_.on_tls_refusal();
    const auto verdict = tls_log_.admit(peer);
    if (verdict.log)
      RS_LOG(warn, "ring") << "refused peer at " << peer << " on the control port " << address_ << ": "
                           << stream.status().message() << RepeatLimiter::left_out_text(verdict, peer);
    co_return;
  }
  greet(std::move(stream).value(), peer, alive);
}

void ControlListener::greet(ControlStream stream, const std::string& peer, const std::weak_ptr<int>& alive) {
  auto link = std::make_shared<PeerLink>(std::move(stream), "peer at " + peer);
  std::weak_ptr<PeerLink> weak = link;
  auto greeted = std::make_shared<bool>(false);
  link->start(
      [this, weak, alive, greeted, peer](peer_wire::Message m) {
        auto self = weak.lock();
        if (!self || alive.expired() || *greeted) return;
        *greeted = true;
        // Only the first frame matters here; the route sets its own
        // handlers, which destroys this one: no capture is used after.
        auto* hello = std::get_if<peer_wire::PeerHello>(&m);
        if (!hello) {
          // A scanner or a stray client may do this in a loop: one line per source a minute.
          const auto verdict = junk_log_.admit(peer);
          if (verdict.log)
            RS_LOG(warn, "ring") << self->peer_name() << " sent something other than a hello; closed"
                                 << RepeatLimiter::left_out_text(verdict, peer);
          self->close(Status::ProtocolError("expected a hello"));
          return;
        }
        ControlListener* listener = this;
        listener->on_first(self, std::move(*hello));
      },
      [](const Status&) {});
  // A stranger that says nothing is not kept.
  auto timer = std::make_shared<asio::steady_timer>(io_, options_.handshake_timeout);
  timer->async_wait([weak, timer, greeted](boost::system::error_code wait_ec) {
    if (wait_ec || *greeted) return;
    if (auto self = weak.lock()) self->close(Status::Timeout("no hello"));
  });
}

void ControlListener::on_first(const std::shared_ptr<PeerLink>& link, peer_wire::PeerHello hello) {
  auto route = routes_.find(hello.job_id);
  if (route == routes_.end()) {
    park(link, std::move(hello));
    return;
  }
  OnHello handler = route->second.on_hello;  // the handler may unroute
  handler(link, hello);
}

void ControlListener::park(const std::shared_ptr<PeerLink>& link, peer_wire::PeerHello hello) {
  const std::string job = hello.job_id;
  if (parked_count_ >= kMaxParked) {
    refuse(link, "ringsyncd at " + address_ + " has " + std::to_string(kMaxParked) +
                     " connections waiting for jobs it does not serve; try again later");
    return;
  }
  RS_LOG(debug, "ring") << link->peer_name() << " (node " << hello.node_rank << " of job '" << job
                        << "') waits for the job's trainers to connect here";
  std::weak_ptr<PeerLink> weak = link;
  parked_[job].push_back({weak, std::move(hello)});
  ++parked_count_;
  auto timer = std::make_shared<asio::steady_timer>(io_, options_.park_timeout);
  timer->async_wait([this, alive = std::weak_ptr<int>(alive_), weak, job, timer](boost::system::error_code ec) {
    if (ec || alive.expired()) return;
    auto it = parked_.find(job);
    if (it == parked_.end()) return;
    auto& waiting = it->second;
    for (auto p = waiting.begin(); p != waiting.end(); ++p) {
      if (p->link.owner_before(weak) || weak.owner_before(p->link)) continue;
      const std::uint32_t node = p->hello.node_rank;
      waiting.erase(p);
      --parked_count_;
      if (waiting.empty()) parked_.erase(it);
      if (auto link = weak.lock(); link && !link->closed()) {
        const std::string why = "job '" + job + "' has no trainer connected to the ringsyncd at " + address_ +
                                " after " + seconds(options_.park_timeout) + ", so it cannot coordinate the job " +
                                "for node " + std::to_string(node) +
                                "; start the job's node-0 trainers there, or check the node list "
                                "(RINGSYNC_NODES) or rendezvous the trainers give";
        RS_LOG(warn, "ring") << "refused " << link->peer_name() << ": " << why;
        refuse(link, why);
      }
      return;
    }
  });
}

}  // namespace ringsync::service::formation
