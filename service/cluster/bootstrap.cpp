#include "service/cluster/bootstrap.h"

#include "service/route/route.h"

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <optional>

#include "common/log.h"
#include "common/units.h"
#include "service/pending_collective.h"

namespace ringsync::service::cluster {

namespace asio = boost::asio;
using asio::ip::tcp;
using asio::use_awaitable;

namespace {

// Same length and bytes, without an early exit that would time the secret.
bool same_token(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

Status stopped() { return Status::Closed("forming the ring was stopped"); }

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
  if (h.halving_doubling_bytes != c.halving_doubling_bytes)
    return who + " runs --algorithm " + route::describe_limit(h.halving_doubling_bytes) + ", node 0 " +
           route::describe_limit(c.halving_doubling_bytes) + "; every node must use the same (--algorithm, --rhd-max-bytes)";
  if (h.node_rank == 0 || h.node_rank >= c.nodes.size())
    return "node rank " + std::to_string(h.node_rank) + " is out of range [1, " +
           std::to_string(c.nodes.size()) + ")";
  return "";
}

Gathering::Gathering(asio::any_io_executor executor, BootstrapConfig config)
    : config_(std::move(config)),
      done_(executor),
      joined_(config_.nodes.size()),
      addresses_(config_.nodes.size()) {
  done_.expires_at(asio::steady_timer::time_point::max());
  if (!addresses_.empty()) addresses_[0] = config_.ucx_address;
}

void Gathering::offer(const std::shared_ptr<PeerLink>& link, const peer_wire::PeerHello& hello) {
  std::string why = finished_ ? "the ring is forming again; retry" : hello_refusal(config_, hello);
  if (why.empty() && joined_[hello.node_rank] && !joined_[hello.node_rank]->closed())
    why = "node " + std::to_string(hello.node_rank) + " has already joined (two daemons with one node rank?)";
  if (!why.empty()) {
    RS_LOG(warn, "ring") << "refused " << link->peer_name() << ": " << why;
    link->send(peer_wire::PeerHelloReply{false, why, 0, {}, 0});
    link->goodbye(Status::InvalidArgument(why));
    return;
  }
  if (joined_[hello.node_rank]) --count_;  // its earlier link closed: this one replaces it
  joined_[hello.node_rank] = link;
  addresses_[hello.node_rank] = hello.ucx_address;
  link->send(peer_wire::PeerHelloReply{true, "", 0, config_.ucx_address, config_.epoch});
  // A node that joined and went away before the roster must be able to join
  // again (it retries), so its place is freed. The handler holds this
  // gathering weakly: the gathering holds the link.
  std::weak_ptr<Gathering> weak = weak_from_this();
  std::weak_ptr<PeerLink> weak_link = link;
  const std::uint32_t rank = hello.node_rank;
  link->set_handlers({}, [weak, weak_link, rank](const Status&) {
    auto self = weak.lock();
    if (!self || self->finished_) return;
    auto& slot = self->joined_[rank];
    if (slot && slot == weak_link.lock()) {
      slot.reset();
      --self->count_;
    }
  });
  if (++count_ == joined_.size()) done_.cancel();
}

asio::awaitable<Result<Joined>> Gathering::wait(std::shared_ptr<StopSource> stop) {
  auto self = shared_from_this();
  const std::size_t n = config_.nodes.size();
  if (n > 1 && count_ < n && !stop->requested) {
    asio::steady_timer deadline(co_await asio::this_coro::executor);
    deadline.expires_after(config_.join_timeout);
    deadline.async_wait([this](boost::system::error_code ec) {
      if (!ec) done_.cancel();
    });
    stop->interrupt = [this] { done_.cancel(); };
    boost::system::error_code ec;
    co_await done_.async_wait(asio::redirect_error(use_awaitable, ec));
    stop->interrupt = nullptr;
  }
  finished_ = true;
  const auto close_all = [&](const Status& why) {
    for (auto& link : joined_)
      if (link) link->close(why);
  };
  if (stop->requested) {
    close_all(stopped());
    co_return stopped();
  }
  if (count_ < n) {
    std::vector<std::uint32_t> missing;
    for (std::uint32_t r = 1; r < n; ++r)
      if (!joined_[r]) missing.push_back(r);
    close_all(Status::Timeout("ring not formed"));
    co_return Status::Timeout("node(s) " + rank_list(missing) + " of job '" + config_.job_id +
                              "' did not join within " + units::format_seconds(config_.join_timeout) +
                              " (this coordinator listens on " + control_address(config_.nodes[0]) + ")");
  }
  peer_wire::Roster roster{config_.epoch, {}};
  for (std::uint32_t r = 0; r < n; ++r) roster.entries.push_back({r, addresses_[r]});
  for (std::uint32_t r = 1; r < n; ++r) {
    if (!joined_[r]->closed()) continue;
    // Left between the last hello and now: the ring cannot form this time.
    close_all(Status::PeerLost("a node left while the ring formed"));
    co_return Status::PeerLost("node " + std::to_string(r) + " left while the ring was forming");
  }
  for (std::uint32_t r = 1; r < n; ++r) {
    joined_[r]->send(roster);
    joined_[r]->set_handlers({}, {});  // the caller sets its own
  }
  Joined j;
  j.epoch = config_.epoch;
  j.ucx_addresses = std::move(addresses_);
  j.workers = std::move(joined_);
  j.workers.resize(n);
  co_return j;
}

asio::awaitable<Result<Joined>> join(const BootstrapConfig& c, std::shared_ptr<StopSource> stop) {
  auto ex = co_await asio::this_coro::executor;
  const auto give_up = std::chrono::steady_clock::now() + c.join_timeout;
  const std::string target = control_address(c.nodes[0]);
  auto backoff = std::chrono::milliseconds(50);
  std::string last_error = "no attempt";
  tcp::resolver resolver(ex);
  for (;;) {
    if (stop->requested) co_return stopped();
    boost::system::error_code ec;
    const std::string port = std::to_string(c.nodes[0].port ? c.nodes[0].port : kDefaultControlPort);
    stop->interrupt = [&resolver] { resolver.cancel(); };
    auto endpoints = co_await resolver.async_resolve(c.nodes[0].host, port,
                                                     asio::redirect_error(use_awaitable, ec));
    stop->interrupt = nullptr;
    if (stop->requested) co_return stopped();
    tcp::socket socket(ex);
    if (!ec) {
      // A host that is down answers nothing: the connect must end at the
      // join deadline rather than after the kernel's minutes of retries.
      asio::steady_timer connect_deadline(ex);
      connect_deadline.expires_at(give_up);
      connect_deadline.async_wait([&socket](boost::system::error_code wait_ec) {
        boost::system::error_code ignored;
        if (!wait_ec) socket.close(ignored);
      });
      stop->interrupt = [&socket] {
        boost::system::error_code ignored;
        socket.close(ignored);
      };
      co_await asio::async_connect(socket, endpoints, asio::redirect_error(use_awaitable, ec));
      stop->interrupt = nullptr;
      connect_deadline.cancel();
      if (stop->requested) co_return stopped();
    }
    if (!ec) {
      auto link = std::make_shared<PeerLink>(std::move(socket), "node 0 at " + target);
      auto result = std::make_shared<std::optional<Result<Joined>>>();
      auto joined = std::make_shared<Joined>();
      auto done = std::make_shared<asio::steady_timer>(ex, asio::steady_timer::time_point::max());
      std::weak_ptr<PeerLink> weak = link;
      link->start(
          [weak, result, joined, done, target](peer_wire::Message m) {
            if (*result) return;
            if (auto* reply = std::get_if<peer_wire::PeerHelloReply>(&m)) {
              if (!reply->accepted) {
                *result = Status::InvalidArgument(target + " refused this node: " + reply->message);
                done->cancel();
              }
            } else if (auto* roster = std::get_if<peer_wire::Roster>(&m)) {
              joined->epoch = roster->epoch;
              joined->ucx_addresses.resize(roster->entries.size());
              for (auto& e : roster->entries)
                if (e.node_rank < roster->entries.size())
                  joined->ucx_addresses[e.node_rank] = std::move(e.ucx_address);
              joined->coordinator = weak.lock();
              *result = std::move(*joined);
              done->cancel();
            }
          },
          [result, done, target](const Status& why) {
            if (*result) return;
            *result = Status::PeerLost(target + " closed the connection while forming the ring: " + why.message());
            done->cancel();
          });
      link->send(peer_wire::PeerHello{peer_wire::kProtocolVersion, c.job_id, c.node_rank,
                                      static_cast<std::uint32_t>(c.nodes.size()), c.slots, c.token,
                                      c.ucx_address, 0, c.ring_chunk_bytes, c.response_cache,
                                      c.inline_bytes, c.halving_doubling_bytes});
      asio::steady_timer deadline(ex);
      deadline.expires_at(give_up);
      deadline.async_wait([done](boost::system::error_code wait_ec) {
        if (!wait_ec) done->cancel();
      });
      stop->interrupt = [done] { done->cancel(); };
      boost::system::error_code wait_ec;
      co_await done->async_wait(asio::redirect_error(use_awaitable, wait_ec));
      stop->interrupt = nullptr;
      deadline.cancel();
      if (stop->requested && !(*result && (*result)->ok())) {
        link->close(stopped());
        co_return stopped();
      }
      if (!*result) {
        link->close(Status::Timeout("ring not formed"));
        co_return Status::Timeout("joined " + target + " but the ring did not form within " +
                                  units::format_seconds(c.join_timeout) + " (other nodes missing?)");
      }
      if (!(*result)->ok()) link->close((*result)->status());
      link->set_handlers({}, {});  // they hold `result`; the caller sets its own
      co_return std::move(**result);
    }
    last_error = ec.message();
    if (std::chrono::steady_clock::now() + backoff > give_up)
      co_return Status::Timeout("node 0 at " + target + " did not accept within " +
                                units::format_seconds(c.join_timeout) + ": " + last_error +
                                "; is its ringsyncd running and reachable?");
    asio::steady_timer wait(ex);
    wait.expires_after(backoff);
    stop->interrupt = [&wait] { wait.cancel(); };
    co_await wait.async_wait(asio::redirect_error(use_awaitable, ec));
    stop->interrupt = nullptr;
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
}

}  // namespace ringsync::service::cluster
