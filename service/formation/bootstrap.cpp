#include "service/formation/bootstrap.h"

#include "service/route/route.h"

#include <algorithm>
#include <mutex>
#include <set>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <optional>

#include "common/log.h"
#include "common/units.h"
#include "service/formation/peer_auth.h"
#include "service/local/pending_collective.h"

namespace ringsync::service::formation {

namespace asio = boost::asio;
using asio::ip::tcp;
using asio::use_awaitable;

namespace {

// A job without a key forms its ring as before; say so once per job.
void note_unauthenticated(const BootstrapConfig& c) {
  if (!c.token.empty() || c.nodes.size() < 2) return;
  static std::mutex mutex;
  static std::set<std::string> told;
  std::lock_guard<std::mutex> lock(mutex);
  if (!told.insert(c.job_id).second) return;
  RS_LOG(info, "ring") << "job '" << c.job_id << "' has no job token: its daemons do not authenticate each "
                       << "other (give --job-token-file or RINGSYNC_JOB_TOKEN)";
}

AuthTranscript transcript(const BootstrapConfig& c, const peer_wire::PeerHello& hello,
                          std::span<const std::uint8_t> coordinator_nonce) {
  return AuthTranscript{c.job_id,   static_cast<std::uint32_t>(c.nodes.size()), hello.node_rank, hello.ucx_address,
                        hello.nonce, coordinator_nonce};
}

Status stopped() { return Status::Closed("forming the ring was stopped"); }

}  // namespace

namespace {

// Whether the hello is for this job and ring at all: checked before the key.
std::string identity_refusal(const BootstrapConfig& c, const peer_wire::PeerHello& h) {
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
  if (h.node_rank == 0 || h.node_rank >= c.nodes.size())
    return "node rank " + std::to_string(h.node_rank) + " is out of range [1, " +
           std::to_string(c.nodes.size()) + ")";
  return "";
}

// The settings every node must share (ring_settings.h): told only to a node
// that proved it holds the key.
std::string settings_refusal(const BootstrapConfig& c, const peer_wire::PeerHello& h) {
  return difference(c.ring, cluster::settings_of(h), "node " + std::to_string(h.node_rank));
}

}  // namespace

std::string hello_refusal(const BootstrapConfig& c, const peer_wire::PeerHello& h) {
  std::string why = identity_refusal(c, h);
  // With a key, the settings are told only after the proof (Gathering).
  return why.empty() && c.token.empty() ? settings_refusal(c, h) : why;
}

Gathering::Gathering(asio::any_io_executor executor, BootstrapConfig config)
    : config_(std::move(config)),
      done_(executor),
      joined_(config_.nodes.size()),
      addresses_(config_.nodes.size()) {
  note_unauthenticated(config_);
  done_.expires_at(asio::steady_timer::time_point::max());
  if (!addresses_.empty()) addresses_[0] = config_.ucx_address;
}

void Gathering::offer(const std::shared_ptr<PeerLink>& link, const peer_wire::PeerHello& hello) {
  std::string why = finished_ ? "the ring is forming again; retry" : identity_refusal(config_, hello);
  if (why.empty()) why = place_refusal(hello);
  if (!why.empty()) return refuse(link, why);
  if (config_.token.empty()) {
    if (why = settings_refusal(config_, hello); !why.empty()) return refuse(link, why);
    return admit(link, hello);
  }
  if (hello.nonce.size() != kAuthNonceBytes)
    return refuse_auth(link, "node " + std::to_string(hello.node_rank) +
                                 " has no job key, but this job needs one (--job-token-file or RINGSYNC_JOB_TOKEN)");
  challenge(link, hello);
}

std::string Gathering::place_refusal(const peer_wire::PeerHello& hello) const {
  if (finished_) return "the ring is forming again; retry";
  if (joined_[hello.node_rank] && !joined_[hello.node_rank]->closed())
    return "node " + std::to_string(hello.node_rank) + " has already joined (two daemons with one node rank?)";
  return "";
}

void Gathering::refuse(const std::shared_ptr<PeerLink>& link, const std::string& why) {
  RS_LOG(warn, "ring") << "refused " << link->peer_name() << ": " << why;
  link->send(peer_wire::PeerHelloReply{false, why, 0, {}, 0});
  link->goodbye(Status::InvalidArgument(why));
}

void Gathering::refuse_auth(const std::shared_ptr<PeerLink>& link, const std::string& why) {
  if (config_.on_auth_failure) config_.on_auth_failure();
  refuse(link, why);
}

void Gathering::challenge(const std::shared_ptr<PeerLink>& link, const peer_wire::PeerHello& hello) {
  std::vector<std::uint8_t> nonce = auth_nonce();
  if (nonce.empty()) return refuse(link, "node 0 could not draw random bytes for a challenge (OpenSSL RAND_bytes)");
  const AuthTranscript t = transcript(config_, hello, nonce);
  link->send(peer_wire::AuthChallenge{nonce, auth_proof(config_.token, AuthRole::kCoordinator, t)});
  // Only this connection's answer is right: its nonce is new.
  auto expected = auth_proof(config_.token, AuthRole::kWorker, t);
  auto answered = std::make_shared<bool>(false);
  std::weak_ptr<Gathering> weak = weak_from_this();
  std::weak_ptr<PeerLink> weak_link = link;
  const std::string who = "node " + std::to_string(hello.node_rank);
  link->set_handlers(
      [weak, weak_link, hello, expected = std::move(expected), answered, who](peer_wire::Message m) {
        auto link = weak_link.lock();
        if (!link || *answered) return;
        *answered = true;
        auto self = weak.lock();
        if (!self) return link->close(Status::Closed("the ring's gathering ended"));
        // Copies: refusing or admitting replaces this handler.
        const auto* proof = std::get_if<peer_wire::AuthProof>(&m);
        if (!proof) return self->refuse_auth(link, who + " answered the challenge with another message");
        if (!same_proof(proof->proof, expected))
          return self->refuse_auth(link, who + " sent a wrong proof of the job's key (another --job-token, or a "
                                              "replayed proof)");
        const peer_wire::PeerHello admitted = hello;
        std::string why = settings_refusal(self->config_, admitted);
        if (why.empty()) why = self->place_refusal(admitted);
        if (!why.empty()) return self->refuse(link, why);
        self->admit(link, admitted);
      },
      [weak, weak_link, answered, who](const Status& why) {
        // A worker with another key refuses node 0's proof and hangs up.
        if (*answered) return;
        *answered = true;
        auto self = weak.lock();
        auto link = weak_link.lock();
        if (!self || !link) return;
        RS_LOG(warn, "ring") << "refused " << link->peer_name() << ": " << who
                             << " hung up at the key challenge (another --job-token?): " << why.message();
        if (self->config_.on_auth_failure) self->config_.on_auth_failure();
      });
  auto timer = std::make_shared<asio::steady_timer>(done_.get_executor(), config_.proof_timeout);
  timer->async_wait([weak, weak_link, timer, answered, who](boost::system::error_code ec) {
    if (ec || *answered) return;
    *answered = true;
    auto link = weak_link.lock();
    if (!link || link->closed()) return;
    if (auto self = weak.lock()) return self->refuse_auth(link, who + " did not answer the key challenge in time");
    link->close(Status::Timeout("no proof of the job's key"));
  });
}

void Gathering::admit(const std::shared_ptr<PeerLink>& link, const peer_wire::PeerHello& hello) {
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
    co_return Status::Timeout("node(s) " + local::rank_list(missing) + " of job '" + config_.job_id +
                              "' did not join within " + units::format_seconds(config_.join_timeout) +
                              " (this coordinator listens on " + cluster::control_address(config_.nodes[0]) + ")");
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

// A worker's join, in its steps: reach node 0 (retried with backoff until the
// join deadline), open the control stream (TLS or plain), then the handshake
// (hello, the key's proofs both ways, node 0's acceptance, the roster).
namespace {

using TimePoint = std::chrono::steady_clock::time_point;

// One attempt to reach node 0: its name resolved and a connection made, by
// the join deadline (a host that is down answers nothing: the connect must
// end then rather than after the kernel's minutes of retries). An error is
// worth another attempt; the caller checks for a stop.
asio::awaitable<Result<tcp::socket>> connect_to_node0(const BootstrapConfig& c, TimePoint give_up, StopSource& stop) {
  auto ex = co_await asio::this_coro::executor;
  boost::system::error_code ec;
  const std::string port = std::to_string(c.nodes[0].port ? c.nodes[0].port : cluster::kDefaultControlPort);
  tcp::resolver resolver(ex);
  stop.interrupt = [&resolver] { resolver.cancel(); };
  auto endpoints = co_await resolver.async_resolve(c.nodes[0].host, port, asio::redirect_error(use_awaitable, ec));
  stop.interrupt = nullptr;
  if (ec || stop.requested) co_return Status::PeerLost(ec ? ec.message() : "stopped");
  tcp::socket socket(ex);
  asio::steady_timer connect_deadline(ex);
  connect_deadline.expires_at(give_up);
  connect_deadline.async_wait([&socket](boost::system::error_code wait_ec) {
    boost::system::error_code ignored;
    if (!wait_ec) socket.close(ignored);
  });
  stop.interrupt = [&socket] {
    boost::system::error_code ignored;
    socket.close(ignored);
  };
  co_await asio::async_connect(socket, endpoints, asio::redirect_error(use_awaitable, ec));
  stop.interrupt = nullptr;
  connect_deadline.cancel();
  if (ec) co_return Status::PeerLost(ec.message());
  co_return std::move(socket);
}

// The control stream over the connected socket: TLS when the job has it (its
// handshake bounded by the proof timeout and the join deadline), else plain.
asio::awaitable<Result<ControlStream>> open_stream(const BootstrapConfig& c, tcp::socket socket, TimePoint give_up,
                                                   StopSource& stop) {
  if (!c.tls) co_return ControlStream(std::move(socket));
  const auto handshake_time = std::min<std::chrono::nanoseconds>(
      c.proof_timeout,
      std::max<std::chrono::nanoseconds>(give_up - std::chrono::steady_clock::now(), std::chrono::milliseconds(1)));
  co_return co_await ControlStream::secure(std::move(socket), *c.tls, ControlStream::Role::kConnected, handshake_time,
                                           &stop.interrupt);
}

// This node's hello, with a fresh nonce for the key challenge when the job has a key.
Result<peer_wire::PeerHello> hello_of(const BootstrapConfig& c) {
  peer_wire::PeerHello hello{peer_wire::kProtocolVersion, c.job_id, c.node_rank,
                             static_cast<std::uint32_t>(c.nodes.size()), c.slots, {}, c.ucx_address, 0};
  put(c.ring, hello);
  if (!c.token.empty()) {
    hello.nonce = auth_nonce();
    if (hello.nonce.empty()) return Status::Internal("no random bytes for the key challenge (OpenSSL RAND_bytes)");
  }
  return hello;
}

// What node 0 has said so far in the handshake. Node 0 must prove it holds
// the key before this node proves it does, and before the roster is
// believed. The link's handlers hold it; the handshake waits on `done`.
struct Handshake {
  Handshake(const BootstrapConfig& c, const asio::any_io_executor& ex, std::string target, peer_wire::PeerHello hello)
      : on_auth_failure(c.on_auth_failure), key(c.token), plain(!c.tls), target(std::move(target)),
        hello(std::move(hello)), proven(c.token.empty()), done(ex, asio::steady_timer::time_point::max()) {}

  void finish(Result<Joined> outcome) {
    result = std::move(outcome);
    done.cancel();
  }
  void refuse(const std::string& why) {
    RS_LOG(warn, "ring") << "refused node 0 at " << target << ": " << why;
    if (on_auth_failure) on_auth_failure();
    finish(Status::InvalidArgument("refused node 0 at " + target + ": " + why));
  }

  void on_message(peer_wire::Message m) {
    heard = true;
    if (result) return;
    if (auto* challenge = std::get_if<peer_wire::AuthChallenge>(&m)) return on_challenge(*challenge);
    if (auto* reply = std::get_if<peer_wire::PeerHelloReply>(&m)) {
      if (!reply->accepted) return finish(Status::InvalidArgument(target + " refused this node: " + reply->message));
      if (!proven) refuse("it accepted this node without proving it holds the job's key (has node 0 no job token?)");
    } else if (auto* roster = std::get_if<peer_wire::Roster>(&m)) {
      if (!proven) return refuse("it sent a roster without proving it holds the job's key (has node 0 no job token?)");
      Joined joined;
      joined.epoch = roster->epoch;
      joined.ucx_addresses.resize(roster->entries.size());
      for (auto& e : roster->entries)
        if (e.node_rank < roster->entries.size()) joined.ucx_addresses[e.node_rank] = std::move(e.ucx_address);
      joined.coordinator = link.lock();
      finish(std::move(joined));
    }
  }

  void on_challenge(const peer_wire::AuthChallenge& challenge) {
    if (key.empty())
      return refuse("it asks for a proof of the job's key, and this node has none (give every node the job's "
                    "token: --job-token-file or RINGSYNC_JOB_TOKEN)");
    if (proven) return refuse("it challenged this node twice");
    const AuthTranscript auth{hello.job_id, hello.num_nodes, hello.node_rank, hello.ucx_address, hello.nonce,
                              challenge.nonce};
    if (challenge.nonce.size() != kAuthNonceBytes ||
        !same_proof(challenge.proof, auth_proof(key, AuthRole::kCoordinator, auth)))
      return refuse("it could not prove it holds the job's key (another job there, or another --job-token)");
    proven = true;
    if (auto l = link.lock()) l->send(peer_wire::AuthProof{auth_proof(key, AuthRole::kWorker, auth)});
  }

  void on_closed(const Status& why) {
    if (result) return;
    // A node 0 with TLS closes a plain-text hello at once; and under TLS 1.3
    // it checks this node's certificate after this side's handshake ended,
    // so a refusal shows here, as a closed link.
    const std::string hint = heard   ? ""
                             : plain ? "; if node 0 runs with TLS (--tls-cert, --tls-key, --tls-ca), give this node "
                                       "the same flags"
                                     : "; node 0 may have refused this node's certificate (is it signed by the CA "
                                       "of node 0's --tls-ca?)";
    finish(Status::PeerLost(target + " closed the connection while forming the ring: " + why.message() + hint));
  }

  std::function<void()> on_auth_failure;
  std::string key;
  bool plain;
  std::string target;
  peer_wire::PeerHello hello;
  std::weak_ptr<PeerLink> link;
  bool proven;         // node 0 proved it holds the key (or the job has none)
  bool heard = false;  // any frame from node 0
  std::optional<Result<Joined>> result;
  asio::steady_timer done;  // cancelled once `result` is set
};

// Over an open stream to node 0: the handshake, by the join deadline.
asio::awaitable<Result<Joined>> handshake(const BootstrapConfig& c, ControlStream stream, TimePoint give_up,
                                          StopSource& stop, const std::string& target) {
  auto ex = co_await asio::this_coro::executor;
  Result<peer_wire::PeerHello> hello = hello_of(c);
  if (!hello.ok()) co_return hello.status();
  auto link = std::make_shared<PeerLink>(std::move(stream), "node 0 at " + target);
  auto state = std::make_shared<Handshake>(c, ex, target, *hello);
  state->link = link;
  link->start([state](peer_wire::Message m) { state->on_message(std::move(m)); },
              [state](const Status& why) { state->on_closed(why); });
  link->send(*hello);
  asio::steady_timer deadline(ex);
  deadline.expires_at(give_up);
  deadline.async_wait([state](boost::system::error_code wait_ec) {
    if (!wait_ec) state->done.cancel();
  });
  stop.interrupt = [state] { state->done.cancel(); };
  boost::system::error_code wait_ec;
  co_await state->done.async_wait(asio::redirect_error(use_awaitable, wait_ec));
  stop.interrupt = nullptr;
  deadline.cancel();
  if (stop.requested && !(state->result && state->result->ok())) {
    link->close(stopped());
    co_return stopped();
  }
  if (!state->result) {
    link->close(Status::Timeout("ring not formed"));
    co_return Status::Timeout("joined " + target + " but the ring did not form within " +
                              units::format_seconds(c.join_timeout) + " (other nodes missing?)");
  }
  if (!state->result->ok()) link->close(state->result->status());
  link->set_handlers({}, {});  // they hold `state`; the caller sets its own
  co_return std::move(*state->result);
}

}  // namespace

asio::awaitable<Result<Joined>> join(const BootstrapConfig& c, std::shared_ptr<StopSource> stop) {
  note_unauthenticated(c);
  auto ex = co_await asio::this_coro::executor;
  const auto give_up = std::chrono::steady_clock::now() + c.join_timeout;
  const std::string target = cluster::control_address(c.nodes[0]);
  auto backoff = std::chrono::milliseconds(50);
  for (;;) {
    if (stop->requested) co_return stopped();
    Result<tcp::socket> socket = co_await connect_to_node0(c, give_up, *stop);
    if (stop->requested) co_return stopped();
    if (socket.ok()) {
      Result<ControlStream> stream = co_await open_stream(c, std::move(socket).value(), give_up, *stop);
      if (stop->requested) co_return stopped();
      if (!stream.ok()) {
        RS_LOG(warn, "ring") << "refused node 0 at " << target << ": " << stream.status().message();
        if (c.on_auth_failure) c.on_auth_failure();
        co_return Status(stream.status().code(), "refused node 0 at " + target + ": " + stream.status().message());
      }
      co_return co_await handshake(c, std::move(stream).value(), give_up, *stop, target);
    }
    if (std::chrono::steady_clock::now() + backoff > give_up)
      co_return Status::Timeout("node 0 at " + target + " did not accept within " +
                                units::format_seconds(c.join_timeout) + ": " + socket.status().message() +
                                "; is its ringsyncd running and reachable?");
    asio::steady_timer wait(ex);
    wait.expires_after(backoff);
    stop->interrupt = [&wait] { wait.cancel(); };
    boost::system::error_code ec;
    co_await wait.async_wait(asio::redirect_error(use_awaitable, ec));
    stop->interrupt = nullptr;
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
}

}  // namespace ringsync::service::formation
