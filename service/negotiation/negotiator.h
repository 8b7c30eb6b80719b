// Which locally ready tensors of one job run, in which order, on every node
// (Horovod's controller, docs/cluster.md "How it works"): every node reports
// what is ready here to node 0, which plans what is ready everywhere, and
// every node applies the same plans in the same order. Repeat tensors travel
// as response-cache bits; small allreduces are exchanged directly among the
// nodes (negotiation::DirectExchange) or answered with the plan.
//
// Holds a tensor from "every local rank submitted it" until its plan or round
// came: ring operations then go to the execution::Executor (Hooks::run), inline results
// are copied out here. Knows the other nodes only as a cluster::ControlPlane, so it is
// tested with in-process links (tests/service/negotiation/test_negotiator.cpp).
// Control thread only.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/peer_wire.h"
#include "common/status.h"
#include "service/cluster/answers.h"
#include "service/cluster/control_plane.h"
#include "service/cluster/job_spec.h"
#include "service/cluster/cluster_config.h"
#include "service/negotiation/bit_history.h"
#include "service/negotiation/coordinator.h"
#include "service/negotiation/direct_exchange.h"
#include "service/negotiation/response_cache.h"
#include "service/observe/daemon_metrics.h"
#include "service/route/route.h"

namespace ringsync::service::observe {
class Timeline;
}

namespace ringsync::service::negotiation {

class Negotiator {
 public:
  struct Hooks {
    // A planned ring operation, in plan order.
    std::function<void(std::shared_ptr<cluster::PlannedOperation>)> run;
    // The nodes no longer agree (a plan names a tensor not ready here, a
    // cache bit nobody can resolve): the ring must start over.
    std::function<void(const Status&)> lose;
    // Whether the executor has nothing queued or running (an idle node
    // reports at once instead of waiting for the cycle).
    std::function<bool()> executor_idle;
  };

  // Tensors that fail here, or finish here (inline results), are answered through `answers`.
  Negotiator(boost::asio::io_context& io, const cluster::JobSpec& job, const cluster::ClusterConfig& settings,
             observe::DaemonMetrics& metrics, observe::Timeline* timeline, cluster::Answers& answers, Hooks hooks);
  ~Negotiator();

  // A ring formed: negotiate over `control` (valid until lost()); whatever
  // became ready while it formed is reported now.
  void formed(std::uint64_t epoch, cluster::ControlPlane* control);
  // The ring is gone, or never formed: every tensor waiting here fails with
  // `why`, counted as `kind` (held ones too, unless keep_held).
  void lost(const Status& why, observe::ErrorKind kind, bool keep_held = false);

  // A rank of the job left (JobRing, once node 0's relay came): every tensor
  // waiting here fails with `why`, and so does every tensor that becomes
  // ready here from now on; node 0 plans nothing more on this ring.
  void break_run(const Status& why);
  // Every rank of the broken run has left this node: tensors of the next
  // run wait here, unreported, until the next ring forms (formed()).
  void hold();

  // Every local rank submitted this collective: negotiate it with the others.
  void local_ready(local::PendingCollective collective);
  // ReadyList (node 0), Plan (from node 0) and Contributions; false for any
  // other message (not negotiation traffic).
  bool on_message(std::uint32_t from, peer_wire::Message& message);

  // Tensors ready here and waiting for the other nodes.
  bool has_waiting() const { return !waiting_.empty(); }
  // A tensor ready here that the other nodes did not ready within `timeout`:
  // why the job cannot go on consistently.
  std::optional<Status> expired(Clock::time_point now, Clock::duration timeout) const;
  // A tensor ready here and waiting for its plan (negotiation) or for the
  // other nodes' contributions (direct exchange), for the in-flight view.
  struct WaitingTensor {
    std::string name;
    Clock::time_point ready_at;
    const char* path = "negotiation";  // or "direct exchange"
    // Where this node knows (node 0 for both paths, every node for a direct
    // exchange): the nodes that readied it and those that have not yet.
    std::vector<std::uint32_t> ready_nodes;
    std::vector<std::uint32_t> missing_nodes;
  };
  std::vector<WaitingTensor> waiting_view(Clock::time_point now) const;
  // Node 0: logs tensors ready on some nodes and missing on others for
  // `stall_after` (once each); returns how many there are (0 elsewhere).
  std::size_t report_stalls(Clock::time_point now, Clock::duration stall_after);
  // Node 0: says so, once, when `name` waits both in a direct exchange (a small
  // allreduce on some nodes) and in the negotiation (larger, or another
  // collective, on others), as soon as both sides are known: the two paths
  // never meet, so no stall timing may decide whether it is named.
  // A side that waited on a ring since lost (it timed out there, or a node
  // failed) still counts for a while: a node that arrives later on the other
  // path is named too, whichever came first.
  void check_paths(const std::string& name);

 private:
  // A locally ready tensor waiting for its plan; a name submitted again
  // before its plan came waits behind it.
  struct Waiting {
    std::deque<local::PendingCollective> queue;
    std::deque<Clock::time_point> ready_at;
  };
  // Ready here, not yet sent to node 0; data: a small allreduce's local reduction.
  struct Unreported {
    peer_wire::ReadyTensor tensor;
    std::optional<std::vector<std::uint8_t>> data;
  };

  // A name's front became ready here: exchange it directly or negotiate it.
  void report(const local::PendingCollective& front);
  // With node 0; with_data: offer the local reduction of a small allreduce.
  void negotiate(const local::PendingCollective& front, bool with_data = true);
  void schedule_report();
  void send_report();
  // Takes the front of a name's queue (its round or plan came); the next one
  // behind it is reported now. nullopt when nothing of that name waits here.
  std::optional<std::pair<local::PendingCollective, Clock::time_point>> take_front(const std::string& name);
  // The metrics and timeline of a tensor whose negotiation ended now.
  void negotiated(const std::string& name, Clock::time_point ready, Clock::time_point now);
  // "<message> (node n runs global ranks Ln to Ln+L-1)", for disagreements.
  std::string with_rank_hint(const std::string& message) const;
  std::string node_name(std::uint32_t node) const;
  void on_ready_list(std::uint32_t from, peer_wire::ReadyList list);
  void schedule_plan();
  void make_plan();
  void on_plan(const peer_wire::Plan& plan);
  // An operation whose result is here (path "plan": it came with the plan;
  // "direct": this node combined every node's contribution): copy it out and answer.
  void complete_inline(const peer_wire::Operation& op, std::vector<local::PendingCollective> tensors,
                       std::vector<Clock::time_point> ready_at, std::string_view path);
  void lose(const Status& why);
  std::optional<peer_wire::ReadyTensor> resolve_bit(std::uint32_t bit, std::uint64_t plans_seen);
  void record_in_cache(const peer_wire::ReadyTensor& tensor, std::uint64_t cycle);
  // Direct exchange of small allreduces (negotiator_direct.cpp).
  void announce();
  void on_contributions(std::uint32_t from, peer_wire::Contributions contributions);
  void on_contribution(std::uint32_t origin, peer_wire::DirectTensor contribution);
  void finish_round(negotiation::DirectExchange::Round round);

  boost::asio::io_context& io_;
  const cluster::JobSpec& job_;
  const cluster::ClusterConfig& settings_;
  observe::DaemonMetrics& metrics_;
  observe::Timeline* timeline_;
  cluster::Answers& answers_;
  Hooks hooks_;
  boost::asio::steady_timer report_timer_;
  // Posted work checks it: the negotiator may be gone when it runs.
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);

  cluster::ControlPlane* control_ = nullptr;  // while formed
  bool formed_ = false;
  std::optional<Status> broken_;  // break_run(): why new tensors fail
  bool holding_ = false;          // hold(): new tensors wait for the next ring
  std::uint64_t epoch_ = 0;

  std::map<std::string, Waiting> waiting_;
  std::vector<Unreported> unreported_;
  bool report_scheduled_ = false;
  Clock::time_point last_report_{};
  std::set<std::string> in_negotiation_;  // reported or announced, not yet finished
  // Small allreduces exchanged directly: the contributions ready here and not
  // yet sent, and the rounds in progress.
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
  std::set<std::string> disagreement_reported_;
  // Node 0: the nodes on each path of tensors that were waiting when their
  // ring was lost, kept kLostPathsLinger (at most kLostPathsKept of them).
  struct LostPaths {
    std::vector<std::uint32_t> direct;
    std::vector<std::uint32_t> negotiated;
    Clock::time_point at;
    std::uint32_t num_nodes = 0;
  };
  static constexpr Clock::duration kLostPathsLinger = std::chrono::minutes(5);
  static constexpr std::size_t kLostPathsKept = 1024;
  std::map<std::string, LostPaths> lost_paths_;
  void remember_paths();
};

}  // namespace ringsync::service::negotiation
