// Forming a ring: every node says hello to the coordinator (node 0) over TCP,
// which checks that all agree on the job (protocol version, job id, node count,
// slots, data-plane settings) and, when the job has a key, that both hold it
// (challenge-response, peer_auth.h: the key never travels), then tells everyone
// the roster —
// the epoch and the UCX worker address of every node. Bounded by a join
// timeout: a node that never comes is a clear error naming it, never a hang;
// and the owner can end an attempt at once (StopSource).
#pragma once

#include <utility>  // Asio 1.18 needs std::exchange declared first

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/hostfile.h"
#include "common/status.h"
#include "service/formation/control_tls.h"
#include "service/cluster/job_spec.h"
#include "service/formation/peer_link.h"
#include "service/cluster/ring_settings.h"

namespace ringsync::service::formation {

struct BootstrapConfig {
  std::string job_id;
  std::string token;  // the job's key; "" when none (the ring is then unauthenticated)
  std::uint32_t node_rank = 0;
  std::uint32_t slots = 1;
  std::vector<HostEntry> nodes;  // control endpoint of every node, by node rank
  std::vector<std::uint8_t> ucx_address;
  std::chrono::nanoseconds join_timeout = std::chrono::seconds(60);
  // Node 0: the epoch the roster announces (workers take it from the roster).
  std::uint64_t epoch = 1;
  // The settings that must be equal on every node.
  cluster::RingSettings ring;
  // Runs for every peer refused for a missing or wrong proof of the key (the
  // daemon counts errors_total{kind="auth"}); may be empty.
  std::function<void()> on_auth_failure;
  // How long node 0 waits for a worker's proof after its challenge; on a
  // worker, also the longest its TLS handshake with node 0 may take.
  std::chrono::nanoseconds proof_timeout = std::chrono::seconds(10);
  // Mutual TLS with node 0 (control_tls.h), before the hello; null: plain text.
  std::shared_ptr<ControlTls> tls;
};

// The outcome of a successful bootstrap.
struct Joined {
  std::uint64_t epoch = 1;
  std::vector<std::vector<std::uint8_t>> ucx_addresses;  // by node rank
  std::shared_ptr<PeerLink> coordinator;                 // on workers: the link to node 0
  std::vector<std::shared_ptr<PeerLink>> workers;        // on node 0: by node rank (0 empty)
};

// Ends an attempt in progress: the join or gathering returns kClosed at once.
struct StopSource {
  bool requested = false;
  std::function<void()> interrupt;  // wakes whatever the attempt waits for now
  void request() {
    requested = true;
    if (auto wake = std::move(interrupt)) wake();
  }
};

// Node 0's side of one attempt: the control port routes this job's hellos to
// offer(); wait() returns once every node joined (the roster is sent) or at
// the join timeout, naming the nodes that did not come.
class Gathering : public std::enable_shared_from_this<Gathering> {
 public:
  Gathering(boost::asio::any_io_executor executor, BootstrapConfig config);

  // Checks the hello, challenges the node when the job has a key, and admits
  // it once its proof is right; refuses it (and closes the link) otherwise.
  void offer(const std::shared_ptr<PeerLink>& link, const peer_wire::PeerHello& hello);
  boost::asio::awaitable<Result<Joined>> wait(std::shared_ptr<StopSource> stop);
  // Whether wait() has returned (later hellos belong to the next attempt).
  bool finished() const { return finished_; }

 private:
  // Why a node that passed hello_refusal cannot take its place now, or "".
  std::string place_refusal(const peer_wire::PeerHello& hello) const;
  void challenge(const std::shared_ptr<PeerLink>& link, const peer_wire::PeerHello& hello);
  void refuse(const std::shared_ptr<PeerLink>& link, const std::string& why);
  void refuse_auth(const std::shared_ptr<PeerLink>& link, const std::string& why);
  void admit(const std::shared_ptr<PeerLink>& link, const peer_wire::PeerHello& hello);

  BootstrapConfig config_;
  boost::asio::steady_timer done_;  // cancelled: every node joined, or stop
  std::vector<std::shared_ptr<PeerLink>> joined_;
  std::vector<std::vector<std::uint8_t>> addresses_;
  std::size_t count_ = 1;
  bool finished_ = false;
};

// A worker's side: connects to nodes[0] (retrying while it starts), passes
// the TLS handshake when there is one, says hello and waits for the roster,
// all within the join timeout. A TLS handshake that fails is an error at once
// (counted like a wrong proof): retrying would not change the certificates.
boost::asio::awaitable<Result<Joined>> join(const BootstrapConfig& config, std::shared_ptr<StopSource> stop);

// Why the coordinator refuses this hello (protocol version, job, shape, node
// rank out of range; and, for a job without a key, data-plane settings), or ""
// when it belongs to the job. The key is checked afterwards, by
// challenge-response, and only a node that proved it learns node 0's settings.
std::string hello_refusal(const BootstrapConfig& config, const peer_wire::PeerHello& hello);

}  // namespace ringsync::service::formation
