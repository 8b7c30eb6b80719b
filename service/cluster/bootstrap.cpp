#include "service/cluster/bootstrap.h"

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstdio>
#include <optional>

#include "common/log.h"
#include "service/pending_collective.h"

namespace ringsync::service::cluster {

namespace asio = boost::asio;
using asio::ip::tcp;
using asio::use_awaitable;

std::string control_address(const HostEntry& node) {
  const std::uint16_t port = node.port ? node.port : kDefaultControlPort;
  const bool v6 = node.host.find(':') != std::string::npos;
  return (v6 ? "[" + node.host + "]" : node.host) + ":" + std::to_string(port);
}

namespace {

std::string seconds(std::chrono::nanoseconds d) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f s", std::chrono::duration<double>(d).count());
  return text;
}

// Same length and bytes, without an early exit that would time the secret.
bool same_token(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

std::string hello_refusal(const BootstrapConfig& c, const peer_wire::PeerHello& h) {
  const std::string who = "node " + std::to_string(h.node_rank);
  if (h.protocol_version != peer_wire::kProtocolVersion)
    return who + " speaks peer protocol " + std::to_string(h.protocol_version) + ", this daemon " +
           std::to_string(peer_wire::kProtocolVersion) + "; run the same ringsync version everywhere";
  if (h.job_id != c.job_id) return who + " is in job '" + h.job_id + "', this ring is job '" + c.job_id + "'";
  if (h.num_nodes != c.nodes.size())
    return who + " expects " + std::to_string(h.num_nodes) + " nodes, this ring has " +
           std::to_string(c.nodes.size());
  if (h.slots != c.slots)
    return who + " has " + std::to_string(h.slots) + " slots, this ring " + std::to_string(c.slots);
  if (!same_token(h.token, c.token)) return who + " did not present the job's token";
  if (h.ring_chunk_bytes != c.ring_chunk_bytes)
    return who + " runs --ring-chunk-bytes " + std::to_string(h.ring_chunk_bytes) + ", node 0 " +
           std::to_string(c.ring_chunk_bytes) + "; every node must use the same";
  if (h.response_cache != c.response_cache)
    return who + " runs --response-cache " + std::to_string(h.response_cache) + ", node 0 " +
           std::to_string(c.response_cache) + "; every node must use the same";
  if (h.inline_bytes != c.inline_bytes)
    return who + " runs --inline-bytes " + std::to_string(h.inline_bytes) + ", node 0 " +
           std::to_string(c.inline_bytes) + "; every node must use the same";
  if (h.node_rank == 0 || h.node_rank >= c.nodes.size())
    return "node rank " + std::to_string(h.node_rank) + " is out of range [1, " +
           std::to_string(c.nodes.size()) + ")";
  return "";
}

namespace {

// Why the coordinator refuses a hello, or "" to accept it.
std::string refusal(const BootstrapConfig& c, const peer_wire::PeerHello& h,
                    const std::vector<std::shared_ptr<PeerLink>>& joined) {
  std::string why = hello_refusal(c, h);
  if (why.empty() && joined[h.node_rank])
    why = "node " + std::to_string(h.node_rank) + " has already joined (two daemons with one node rank?)";
  return why;
}

// A timer used as an event: wait() until notify() or the deadline.
struct Signal {
  explicit Signal(asio::any_io_executor ex) : timer(ex) { timer.expires_at(asio::steady_timer::time_point::max()); }
  void notify() { timer.cancel(); }
  asio::steady_timer timer;
};

asio::awaitable<Result<Membership>> coordinate(const BootstrapConfig& c, tcp::acceptor& acceptor) {
  auto ex = co_await asio::this_coro::executor;
  const std::size_t n = c.nodes.size();
  auto joined = std::make_shared<std::vector<std::shared_ptr<PeerLink>>>(n);
  auto addresses = std::make_shared<std::vector<std::vector<std::uint8_t>>>(n);
  (*addresses)[0] = c.ucx_address;
  auto count = std::make_shared<std::size_t>(1);
  auto done = std::make_shared<Signal>(ex);
  auto finished = std::make_shared<bool>(false);

  asio::steady_timer deadline(ex);
  deadline.expires_after(c.join_timeout);
  deadline.async_wait([done](boost::system::error_code ec) {
    if (!ec) done->notify();
  });

  // Accept until everyone joined or the deadline; each connection must say hello.
  asio::co_spawn(ex, [&acceptor, c, joined, addresses, count, done, finished]() -> asio::awaitable<void> {
    while (!*finished) {
      boost::system::error_code ec;
      tcp::socket socket = co_await acceptor.async_accept(asio::redirect_error(use_awaitable, ec));
      if (ec || *finished) co_return;
      const std::string peer = socket.remote_endpoint(ec).address().to_string();
      auto link = std::make_shared<PeerLink>(std::move(socket), "peer at " + peer);
      std::weak_ptr<PeerLink> weak = link;
      // The handlers hold `joined` weakly: it holds the links, and a link that
      // held it back would never be freed if the daemon stops mid-bootstrap.
      std::weak_ptr<std::vector<std::shared_ptr<PeerLink>>> weak_joined = joined;
      link->start(
          [c, weak, weak_joined, addresses, count, done](peer_wire::Message m) {
            auto self = weak.lock();
            auto joined = weak_joined.lock();
            auto* hello = std::get_if<peer_wire::PeerHello>(&m);
            if (!self || !joined) return;
            if (!hello) {
              self->close(Status::ProtocolError("expected a hello first"));
              return;
            }
            const std::string why = refusal(c, *hello, *joined);
            if (!why.empty()) {
              RS_LOG(warn, "ring") << "refused a peer: " << why;
              self->send(peer_wire::PeerHelloReply{false, why, 0, {}, 0});
              self->goodbye(Status::InvalidArgument(why));
              return;
            }
            (*joined)[hello->node_rank] = self;
            (*addresses)[hello->node_rank] = hello->ucx_address;
            self->send(peer_wire::PeerHelloReply{true, "", 0, c.ucx_address, 1});
            if (++*count == joined->size()) done->notify();
          },
          [weak, weak_joined, count, finished](const Status&) {
            auto joined = weak_joined.lock();
            if (!joined) return;
            // A node that joined and went away before the roster must be able
            // to join again (it retries), so its place is freed.
            if (*finished) return;
            auto self = weak.lock();
            for (auto& j : *joined)
              if (j && j == self) {
                j.reset();
                --*count;
              }
          });
    }
  }, asio::detached);

  if (n > 1) {
    boost::system::error_code ec;
    co_await done->timer.async_wait(asio::redirect_error(use_awaitable, ec));
  }
  *finished = true;
  deadline.cancel();
  boost::system::error_code ignored;
  acceptor.cancel(ignored);
  if (*count < n) {
    std::vector<std::uint32_t> missing;
    for (std::uint32_t r = 1; r < n; ++r)
      if (!(*joined)[r]) missing.push_back(r);
    for (auto& link : *joined)
      if (link) link->close(Status::Timeout("ring not formed"));
    co_return Status::Timeout("node(s) " + rank_list(missing) + " of job '" + c.job_id +
                              "' did not join within " + seconds(c.join_timeout) +
                              " (this coordinator listens on " + control_address(c.nodes[0]) + ")");
  }
  peer_wire::Roster roster{1, {}};
  for (std::uint32_t r = 0; r < n; ++r) roster.entries.push_back({r, (*addresses)[r]});
  for (auto& link : *joined) {
    if (!link) continue;
    if (link->closed()) {
      // Left between the last hello and now: the ring cannot form this time.
      for (auto& other : *joined)
        if (other) other->close(Status::PeerLost("a node left while the ring formed"));
      co_return Status::PeerLost("node " + std::to_string(&link - joined->data()) +
                                 " left while the ring was forming");
    }
    link->send(roster);
    link->set_handlers({}, {});  // the hello handler holds `joined`; the caller sets its own
  }
  Membership m;
  m.ucx_addresses = *addresses;
  m.workers = *joined;
  co_return m;
}

asio::awaitable<Result<Membership>> join(const BootstrapConfig& c) {
  auto ex = co_await asio::this_coro::executor;
  const auto give_up = std::chrono::steady_clock::now() + c.join_timeout;
  const std::string target = control_address(c.nodes[0]);
  auto backoff = std::chrono::milliseconds(50);
  std::string last_error = "no attempt";
  tcp::resolver resolver(ex);
  for (;;) {
    boost::system::error_code ec;
    const std::string port = std::to_string(c.nodes[0].port ? c.nodes[0].port : kDefaultControlPort);
    auto endpoints = co_await resolver.async_resolve(c.nodes[0].host, port,
                                                     asio::redirect_error(use_awaitable, ec));
    tcp::socket socket(ex);
    if (!ec) co_await asio::async_connect(socket, endpoints, asio::redirect_error(use_awaitable, ec));
    if (!ec) {
      auto link = std::make_shared<PeerLink>(std::move(socket), "node 0 at " + target);
      auto result = std::make_shared<std::optional<Result<Membership>>>();
      auto membership = std::make_shared<Membership>();
      auto done = std::make_shared<Signal>(ex);
      std::weak_ptr<PeerLink> weak = link;
      link->start(
          [weak, result, membership, done, target](peer_wire::Message m) {
            if (*result) return;
            if (auto* reply = std::get_if<peer_wire::PeerHelloReply>(&m)) {
              if (!reply->accepted) {
                *result = Status::InvalidArgument(target + " refused this node: " + reply->message);
                done->notify();
              }
            } else if (auto* roster = std::get_if<peer_wire::Roster>(&m)) {
              membership->epoch = roster->epoch;
              membership->ucx_addresses.resize(roster->entries.size());
              for (auto& e : roster->entries)
                if (e.node_rank < roster->entries.size())
                  membership->ucx_addresses[e.node_rank] = std::move(e.ucx_address);
              membership->coordinator = weak.lock();
              *result = std::move(*membership);
              done->notify();
            }
          },
          [result, done, target](const Status& why) {
            if (*result) return;
            *result = Status::PeerLost(target + " closed the connection while forming the ring: " + why.message());
            done->notify();
          });
      link->send(peer_wire::PeerHello{peer_wire::kProtocolVersion, c.job_id, c.node_rank,
                                      static_cast<std::uint32_t>(c.nodes.size()), c.slots, c.token,
                                      c.ucx_address, 0, c.ring_chunk_bytes, c.response_cache,
                                      c.inline_bytes});
      asio::steady_timer deadline(ex);
      deadline.expires_at(give_up);
      deadline.async_wait([done](boost::system::error_code wait_ec) {
        if (!wait_ec) done->notify();
      });
      boost::system::error_code wait_ec;
      co_await done->timer.async_wait(asio::redirect_error(use_awaitable, wait_ec));
      deadline.cancel();
      if (!*result) {
        link->close(Status::Timeout("ring not formed"));
        co_return Status::Timeout("joined " + target + " but the ring did not form within " +
                                  seconds(c.join_timeout) + " (other nodes missing?)");
      }
      if (!(*result)->ok()) link->close((*result)->status());
      link->set_handlers({}, {});  // they hold `result`; the caller sets its own
      co_return std::move(**result);
    }
    last_error = ec.message();
    if (std::chrono::steady_clock::now() + backoff > give_up)
      co_return Status::Timeout("node 0 at " + target + " did not accept within " +
                                seconds(c.join_timeout) + ": " + last_error +
                                "; is its ringsyncd running and reachable?");
    asio::steady_timer wait(ex);
    wait.expires_after(backoff);
    co_await wait.async_wait(asio::redirect_error(use_awaitable, ec));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
}

}  // namespace

asio::awaitable<Result<Membership>> bootstrap(const BootstrapConfig& config, tcp::acceptor* acceptor) {
  if (config.nodes.empty()) co_return Status::InvalidArgument("a ring needs at least one node");
  if (config.node_rank >= config.nodes.size())
    co_return Status::InvalidArgument("node rank " + std::to_string(config.node_rank) +
                                      " is not below the node count " +
                                      std::to_string(config.nodes.size()));
  if (config.node_rank == 0) {
    if (!acceptor && config.nodes.size() > 1)
      co_return Status::InvalidArgument("the coordinator needs a listening control socket");
    if (config.nodes.size() == 1) {
      Membership m;
      m.ucx_addresses = {config.ucx_address};
      m.workers.resize(1);
      co_return m;
    }
    co_return co_await coordinate(config, *acceptor);
  }
  co_return co_await join(config);
}

}  // namespace ringsync::service::cluster
