// This daemon's part in a multi-node job (docs/cluster.md): forms the ring
// with the other daemons, negotiates which locally-ready tensors run in which
// order (node 0 coordinates), runs each planned operation (local reduce →
// ring over UCX → copy back to every local rank), and tears everything down
// when a node is lost, then forms the ring again.
//
// Runs on the daemon's control thread, except the ring itself (RingEngine's
// thread) and the memory work (WorkPool).
//
//   formation_loop ──bootstrap──▶ form() ──(links, engine)──▶ formed
//        ▲                                                      │ a link closes, a goodbye,
//        └────────────── lose(why): fail everything, ◀──────────┘ a ring operation fails
//                        goodbye to the others
#pragma once

#include <utility>  // Asio 1.18 needs std::exchange declared first

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/peer_wire.h"
#include "common/status.h"
#include "service/cluster/bootstrap.h"
#include "service/cluster/peer_link.h"
#include "service/cluster/ring_engine.h"
#include "service/cluster/staging_buffers.h"
#include "service/daemon_config.h"
#include "service/daemon_metrics.h"
#include "service/negotiation/bit_history.h"
#include "service/negotiation/coordinator.h"
#include "service/negotiation/direct_exchange.h"
#include "service/negotiation/response_cache.h"
#include "service/pending_collective.h"
#include "service/transport/counting.h"
#include "service/transport/ucx_context.h"
#include "service/work_pool.h"

namespace ringsync::service {
class Timeline;
}

namespace ringsync::service::cluster {

class NodeOperation;

class ClusterNode {
 public:
  struct Hooks {
    // Answers every rank of a collective with an error (and counts it).
    std::function<void(PendingCollective&, const Status&, std::string_view error_kind)> fail;
    // Answers every rank with success; `ready` is when the node had it ready,
    // `ranks` the ranks of the whole job (for bus bandwidth).
    std::function<void(PendingCollective&, Clock::time_point ready, std::size_t ranks)> succeed;
    // The ring was lost: the local job must fail what it holds and refuse more.
    std::function<void(const Status&)> ring_lost;
  };

  ClusterNode(boost::asio::io_context& io, const ClusterConfig& config, WorkPool& pool,
              DaemonMetrics& metrics, Timeline* timeline, Hooks hooks);
  ~ClusterNode();

  // Node 0 binds its control port (an error if it cannot); then forming starts.
  Status start();
  // Shutdown: fails everything with `why`, says goodbye, stops forming.
  void stop(const Status& why);

  // A local rank left with collectives of the job unfinished (it died, or the
  // job ended early): what other nodes hold for this job can never complete
  // and must not meet the next job's tensors, so the ring starts over
  // (every node fails the job's collectives with `why`).
  void abandon_job(const Status& why);
  // Tensors ready here and waiting for the other nodes (incl. timed out ones).
  bool has_waiting() const { return !waiting_.empty(); }

  // Every local rank submitted this collective: negotiate it with the others.
  void local_ready(PendingCollective collective);
  // Periodic: stall report (coordinator), collective timeout of tensors the
  // other nodes never got ready, link bandwidth. Returns the number of tensors
  // stalled across nodes.
  std::size_t sweep(Clock::time_point now, Clock::duration stall_after, Clock::duration timeout);

  std::uint32_t node_rank() const { return config_.node_rank; }
  std::uint32_t num_nodes() const { return static_cast<std::uint32_t>(config_.nodes.size()); }
  std::uint32_t slots() const { return config_.slots(); }
  const std::string& job_id() const { return config_.job_id; }
  bool formed() const { return formed_; }

 private:
  // One planned operation, from the plan until every rank is answered.
  struct Running {
    peer_wire::Operation op;
    std::vector<PendingCollective> tensors;
    std::vector<Clock::time_point> ready_at;
    std::shared_ptr<NodeOperation> work;
    std::uint64_t epoch = 0;  // the ring it was planned on
    Clock::time_point started;
  };
  // A locally ready tensor waiting for its plan; a name submitted again
  // before its plan came waits behind it.
  struct Waiting {
    std::deque<PendingCollective> queue;
    std::deque<Clock::time_point> ready_at;
  };

  // Formation and failure (cluster_node.cpp).
  boost::asio::awaitable<void> formation_loop();
  Status form(Membership membership, std::unique_ptr<transport::UcxContext> ucx);
  void lose(const Status& why);
  // Node 0, while the ring is formed (cluster_admission.cpp): answers whoever
  // connects (a restarted node, a stranger) instead of leaving them in the backlog.
  boost::asio::awaitable<void> accept_while_formed(std::uint64_t epoch);
  void on_late_hello(const std::shared_ptr<PeerLink>& link, const peer_wire::PeerHello& hello);
  BootstrapConfig bootstrap_config() const;
  void fail_waiting(const Status& why, std::string_view kind);
  void on_link_closed(std::uint32_t node, const Status& why);
  void on_peer_message(std::uint32_t from, peer_wire::Message message);
  std::string node_name(std::uint32_t node) const;

  // Negotiation (cluster_negotiation.cpp).
  // A name's front became ready here: exchange it directly or negotiate it.
  void report(const PendingCollective& front);
  // With node 0; with_data: offer the local reduction of a small allreduce.
  void negotiate(const PendingCollective& front, bool with_data = true);
  void schedule_report();
  void send_report();
  // Takes the front of a name's queue (its round or plan came); the next one
  // behind it is reported now. nullopt when nothing of that name waits here.
  std::optional<std::pair<PendingCollective, Clock::time_point>> take_front(const std::string& name);
  // The metrics and timeline of a tensor whose negotiation ended now.
  void negotiated(const std::string& name, Clock::time_point ready, Clock::time_point now);
  // "<message> (node n runs global ranks Ln to Ln+L-1)", for disagreements.
  std::string with_rank_hint(const std::string& message) const;
  void on_ready_list(std::uint32_t from, peer_wire::ReadyList list);
  void schedule_plan();
  void make_plan();
  void on_plan(const peer_wire::Plan& plan);
  // An operation whose result is here (path "plan": it came with the plan;
  // "direct": this node combined every node's contribution): copy it out and answer.
  void complete_inline(const peer_wire::Operation& op, std::vector<PendingCollective> tensors,
                       std::vector<Clock::time_point> ready_at, std::string_view path);
  // Direct exchange of small allreduces (cluster_direct.cpp).
  void announce();
  void on_contributions(std::uint32_t from, peer_wire::Contributions contributions);
  void on_contribution(std::uint32_t origin, peer_wire::DirectTensor contribution);
  void finish_round(negotiation::DirectExchange::Round round);
  std::optional<peer_wire::ReadyTensor> resolve_bit(std::uint32_t bit, std::uint64_t plans_seen);
  void record_in_cache(const peer_wire::ReadyTensor& tensor, std::uint64_t cycle);

  // Execution (cluster_execution.cpp).
  void start_operations();
  void begin(std::shared_ptr<Running> running);
  void run_ring(std::shared_ptr<Running> running);
  void scatter(std::shared_ptr<Running> running);
  void complete(std::shared_ptr<Running> running, const Status& status);

  boost::asio::io_context& io_;
  ClusterConfig config_;
  WorkPool& pool_;
  DaemonMetrics& metrics_;
  Timeline* timeline_;
  Hooks hooks_;
  // Ring buffers of fused and in-place operations, kept up to one fusion
  // buffer's worth between operations.
  std::shared_ptr<StagingBuffers> staging_;

  std::unique_ptr<boost::asio::ip::tcp::acceptor> acceptor_;  // node 0
  boost::asio::steady_timer wake_formation_;
  boost::asio::steady_timer report_timer_;
  bool stopping_ = false;
  bool formed_ = false;
  std::uint64_t epoch_ = 0;

  // Formed ring.
  std::shared_ptr<PeerLink> coordinator_link_;           // workers
  std::vector<std::shared_ptr<PeerLink>> worker_links_;  // node 0, by node rank
  std::unique_ptr<RingEngine> engine_;
  // Engines of lost rings, until their aborted tasks have been delivered.
  std::vector<std::unique_ptr<RingEngine>> retired_;
  Status last_loss_ = Status::Ok();
  std::shared_ptr<transport::LinkCounters> link_counters_;
  std::vector<std::uint64_t> last_link_bytes_;  // sent then received, by peer
  Clock::time_point last_link_sample_;

  // Negotiation.
  std::map<std::string, Waiting> waiting_;
  // Ready here, not yet sent to node 0; data: a small allreduce's local reduction.
  struct Unreported {
    peer_wire::ReadyTensor tensor;
    std::optional<std::vector<std::uint8_t>> data;
  };
  std::vector<Unreported> unreported_;
  bool report_scheduled_ = false;
  Clock::time_point last_report_{};
  std::set<std::string> in_negotiation_;  // reported or announced, not yet finished
  // Small allreduces exchanged directly: the limit, the contributions ready
  // here and not yet sent, and the rounds in progress.
  std::uint64_t direct_limit_ = 0;
  std::vector<peer_wire::DirectTensor> unannounced_;
  std::unique_ptr<negotiation::DirectExchange> direct_;
  std::uint64_t plans_applied_ = 0;
  std::unique_ptr<negotiation::ResponseCache> cache_;
  // Coordinator only.
  std::unique_ptr<negotiation::Coordinator> coordinator_;
  bool plan_scheduled_ = false;
  std::uint64_t next_cycle_ = 1;
  std::unique_ptr<negotiation::BitHistory> bit_history_;
  std::set<std::string> stall_reported_;

  // Execution.
  std::deque<std::shared_ptr<Running>> queued_;
  std::size_t in_flight_ = 0;
  std::map<std::uint32_t, Clock::time_point> active_;  // by sequence: started ring operations
};

}  // namespace ringsync::service::cluster
