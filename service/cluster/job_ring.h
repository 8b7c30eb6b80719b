// This daemon's part in one multi-node job (docs/cluster.md): the job's
// formation::Membership (forming the ring, its links and epochs), its negotiation::Negotiator (which
// ready tensors run in which order; node 0 coordinates) and its execution::Executor (local
// reduce → ring over UCX → copy back to every local rank), wired together.
// Each job of the daemon has one; they share only the daemon's control port,
// work pool and metrics registry.
//
// Runs on the daemon's control thread, except the ring itself (execution::RingEngine's
// thread) and the memory work (WorkPool).
#pragma once

#include <utility>  // Asio 1.18 needs std::exchange declared first

#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "service/cluster/answers.h"
#include "service/execution/executor.h"
#include "service/cluster/job_spec.h"
#include "service/formation/membership.h"
#include "service/negotiation/negotiator.h"
#include "service/cluster/cluster_config.h"
#include "service/local/pending_collective.h"
#include "service/observe/daemon_metrics.h"
#include "service/rendezvous/rendezvous.h"
#include "service/threads/work_pool.h"

namespace ringsync::service::observe {
class Timeline;
}

namespace ringsync::service::formation {
class ControlListener;
}

namespace ringsync::service::cluster {

class JobRing {
 public:
  struct Hooks {
    // The ring was lost, or a rank of the job left (on any node): the local
    // job must fail what it holds and refuse more.
    std::function<void(const Status&)> ring_lost;
    // The ring closed quietly: the job's run ended on every node.
    std::function<void()> finished;
    // A job with a rendezvous store: this node is registered (its node rank
    // known) or could not be (the hellos waiting for their reply get why).
    std::function<void(const Status&)> registered;
  };

  // Every collective of the job is answered through `answers`. `data_plane`
  // null: UCX with the settings' transports.
  JobRing(boost::asio::io_context& io, JobSpec job, const ClusterConfig& settings, formation::ControlListener* listener,
          threads::WorkPool& pool, observe::DaemonMetrics& metrics, observe::Timeline* timeline, Answers& answers,
          Hooks hooks, std::unique_ptr<formation::DataPlane> data_plane = nullptr);
  ~JobRing();
  JobRing(const JobRing&) = delete;
  JobRing& operator=(const JobRing&) = delete;

  // Starts forming the ring (node 0: takes the job's hellos from the control
  // port); with a rendezvous store, registers first (Hooks::registered).
  Status start();
  // Whether this node's rank is known (always, without a rendezvous store).
  bool registered() const { return registered_; }
  // For good: fails everything with `why`; the other nodes are told `goodbye`.
  void stop(const Status& why, const Status& goodbye);
  // Nothing of this ring is left in the pool or an engine: it may be destroyed.
  bool done() const;

  // A rank of the job on this node left (exited, died, was found stopped):
  // no collective of the run can complete any more. Every node is told
  // through node 0, which relays the first such notice of a run after the
  // plans it already made; every node then fails the tensors still waiting
  // (and later ones) with `why`, while operations already planned finish.
  // Once every node's ranks have left, node 0 closes the ring quietly (a
  // pre-configured job's ring forms again for the next run).
  // clean: it left on purpose with nothing unfinished (the usual end of a
  // run: logged at info, not as a warning).
  void rank_left(std::uint32_t global_rank, const Status& why, bool clean = false);
  // How many of the job's ranks are connected to this node now.
  void set_local_ranks(std::size_t connected);
  // A run of the job was broken (a rank left) and not yet closed everywhere.
  bool broken() const { return broken_.has_value(); }
  // Tensors ready here and waiting for the other nodes (incl. timed out ones).
  bool has_waiting() const { return negotiator_.has_waiting(); }

  // Every local rank submitted this collective: negotiate it with the others.
  void local_ready(local::PendingCollective collective);
  // Periodic: stall report (coordinator), collective timeout of tensors the
  // other nodes never got ready and of stuck ring operations, link bandwidth.
  // Returns the number of tensors stalled across nodes.
  std::size_t sweep(Clock::time_point now, Clock::duration stall_after, Clock::duration timeout);

  // What this node's part of the job waits for now (the daemon's in-flight
  // view): tensors ready here in negotiation, and the operations running.
  struct InFlight {
    std::vector<negotiation::Negotiator::WaitingTensor> planning;
    std::vector<execution::Executor::InFlight> operations;
  };
  InFlight in_flight(Clock::time_point now) const {
    return {negotiator_.waiting_view(now), executor_.in_flight(now)};
  }
  std::uint64_t epoch() const { return membership_->epoch(); }

  const JobSpec& job() const { return job_; }
  std::uint32_t node_rank() const { return job_.node_rank; }
  std::uint32_t num_nodes() const { return job_.num_nodes; }
  // Nodes waiting to join the job's next run (Rendezvous::nodes_waiting).
  std::uint32_t nodes_waiting() const { return rendezvous_ ? rendezvous_->nodes_waiting() : 0; }
  std::uint32_t slots() const { return job_.slots; }
  const std::string& job_id() const { return job_.id; }
  bool formed() const { return membership_->formed(); }

 private:
  void on_formed(std::uint64_t epoch);
  void on_lost(const Status& why, bool quiet);
  void on_message(std::uint32_t from, peer_wire::Message message);
  // Node 0: the first notice of a run breaks it everywhere.
  void break_everywhere(const peer_wire::RankLeft& notice);
  void apply_break(const Status& why, bool clean);
  void check_drained();
  void maybe_finish();

  JobSpec job_;  // first: the parts below refer to it
  const ClusterConfig& settings_;
  Answers& answers_;
  Hooks hooks_;
  bool stopping_ = false;
  bool registered_ = true;
  boost::asio::io_context& io_;
  std::shared_ptr<rendezvous::Rendezvous> rendezvous_;
  Status store_error_ = Status::Ok();  // why the rendezvous store could not be opened
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
  // The current run's break: why, whether this node's ranks have all left
  // since (and when), and on node 0 which workers said so.
  std::optional<Status> broken_;
  bool notice_sent_ = false;  // a worker's notice is on its way to node 0
  bool drained_ = false;
  Clock::time_point drained_at_;
  std::vector<bool> drained_nodes_;
  std::size_t local_ranks_ = 0;
  // A rank that left while the ring was between runs: told to the next ring.
  struct Notice {
    std::uint32_t global_rank;
    Status why;
    bool clean;
  };
  std::optional<Notice> unsent_notice_;
  execution::Executor executor_;
  negotiation::Negotiator negotiator_;
  std::shared_ptr<formation::Membership> membership_;
};

}  // namespace ringsync::service::cluster
