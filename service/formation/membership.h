// Who is in one job's ring, and whether it is up: forms the ring with the
// other daemons (bootstrap.h), wires the control links (heartbeats and the
// watchdog of PeerLink), builds the data plane and the ring's engine, and
// tears it all down when a node is lost, then forms it again. Node 0 takes
// the hellos the daemon's control port routes to this job. Knows nothing of
// tensors: negotiation traffic goes to Hooks::message.
//
//   formation_loop ──bootstrap──▶ form() ──(links, engine)──▶ formed
//        ▲                                                      │ a link closes, a goodbye,
//        └────────────── lose(why): goodbye to the others, ◀────┘ lose() from the job
//                        Hooks::lost
//
// Shared-owned: the formation coroutine keeps it alive until it has ended,
// which stop() makes happen at once. Control thread only.
#pragma once

#include <utility>  // Asio 1.18 needs std::exchange declared first

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <memory>
#include <vector>

#include "common/peer_wire.h"
#include "common/status.h"
#include "service/formation/bootstrap.h"
#include "service/cluster/control_plane.h"
#include "service/formation/data_plane.h"
#include "service/cluster/job_spec.h"
#include "service/formation/peer_link.h"
#include "service/execution/ring_engine.h"
#include "service/cluster/cluster_config.h"
#include "service/observe/daemon_metrics.h"
#include "service/rendezvous/rendezvous.h"
#include "service/transport/counting.h"

namespace ringsync::service::formation {

class ControlListener;

class Membership : public cluster::ControlPlane, public std::enable_shared_from_this<Membership> {
 public:
  struct Hooks {
    // The ring is up: engine() and the control plane are usable.
    std::function<void(std::uint64_t epoch)> formed;
    // The formed ring ended with `why` (the goodbyes are sent). quiet: the
    // job's run ended on every node (finish()); nothing was lost. lost_node:
    // the node the verdict names (-1: none).
    std::function<void(const Status& why, bool quiet, std::int32_t lost_node)> lost;
    // An attempt to form the ring failed; the next one starts after a pause.
    std::function<void(const Status& why)> attempt_failed;
    // Any frame of a formed ring that is not membership's own.
    std::function<void(std::uint32_t from, peer_wire::Message message)> message;
  };

  // `job` and `settings` must outlive this object's owner; `listener` (node 0
  // of a job of several nodes) must outlive stop(). Every attempt first asks
  // `rendezvous` for the job's members (filling in job.nodes) and, on node 0,
  // for the ring's epoch.
  Membership(boost::asio::io_context& io, cluster::JobSpec& job, const cluster::ClusterConfig& settings, ControlListener* listener,
             std::unique_ptr<DataPlane> data_plane, observe::DaemonMetrics& metrics, Hooks hooks,
             std::shared_ptr<rendezvous::Rendezvous> rendezvous);
  ~Membership() override;

  // Starts forming (node 0 takes this job's hellos from the control port).
  Status start();
  // For good: a formed ring says goodbye with `why`; no more forming, no more hooks.
  void stop(const Status& why);
  // Tears the formed ring down for every node (it forms again when
  // re-forming is on). lost_node: the node `why` is about, if any.
  void lose(const Status& why, std::int32_t lost_node = -1);
  // The data plane failed (`why`): the control plane usually says within a
  // moment which node is to blame, and then that verdict is what every node
  // reports. If it says nothing within twice --peer-timeout, `why` is lost.
  void suspect(const Status& why);
  // Node 0: the job's run ended on every node; closes the ring quietly on all.
  void finish(const Status& why);
  // Whether a lost ring forms again (a pre-configured job) or this ring's
  // life ends with its first loss (a job its trainers described: the next
  // run is a new ring). Default true.
  void set_reform(bool reform) { reform_ = reform; }
  // Forming ended for good: stopped, or lost without re-forming.
  bool ended() const { return ended_; }

  // cluster::ControlPlane: frames to the other nodes of the formed ring.
  void send(std::uint32_t node, const peer_wire::Message& message) override;

  bool formed() const { return formed_; }
  std::uint64_t epoch() const { return epoch_; }
  execution::RingEngine* engine() { return engine_.get(); }
  // What carries the data-plane link to each node of the formed ring, by node
  // rank ("tcp/eth0"; "" for this node and where UCX cannot tell).
  const std::vector<std::string>& peer_lanes() const { return peer_lanes_; }
  // Engines of lost rings whose aborted operations are still being delivered.
  bool settled() const;
  // Adds the bytes moved to and from each peer since the last call to the
  // link metrics, data plane and control links apart (and sets the bandwidth
  // gauges over that period, both together), and the send-busy time.
  void sample_links(Clock::time_point now);

 private:
  boost::asio::awaitable<void> formation_loop(std::shared_ptr<Membership> self);
  BootstrapConfig bootstrap_config(std::vector<std::uint8_t> ucx_address) const;
  Status form(Joined joined);
  // Logs and exports (ringsync_peer_transports_info) what carries the link to each peer.
  void describe_links(const transport::Transport& transport);
  void on_hello(const std::shared_ptr<PeerLink>& link, const peer_wire::PeerHello& hello);
  void on_late_hello(const std::shared_ptr<PeerLink>& link, const peer_wire::PeerHello& hello);
  void on_link_closed(std::uint32_t node, const Status& why, const PeerLink& link);
  void on_peer_message(std::uint32_t from, peer_wire::Message message);
  // told_others: the reason as the other nodes should read it ("" : why's).
  void lose(const Status& why, bool quiet, std::int32_t lost_node, const std::string& told_others = "");
  // "node 2 (10.0.0.13:29517)" for a peer, "this node (node 2 at ...)" for this one.
  std::string this_node() const;
  std::string node_name(std::uint32_t node) const { return cluster::node_name(job_, node); }

  boost::asio::io_context& io_;
  cluster::JobSpec& job_;
  std::shared_ptr<rendezvous::Rendezvous> rendezvous_;
  const cluster::ClusterConfig& settings_;
  ControlListener* listener_;
  std::uint64_t route_ = 0;  // node 0: this ring's route on the control port
  std::unique_ptr<DataPlane> data_plane_;
  observe::DaemonMetrics& metrics_;
  Hooks hooks_;
  boost::asio::steady_timer wake_formation_;
  boost::asio::steady_timer suspicion_;
  std::shared_ptr<StopSource> stop_ = std::make_shared<StopSource>();
  bool stopping_ = false;
  bool formed_ = false;
  bool reform_ = true;
  bool started_ = false;
  bool ended_ = false;
  // Counts rings formed here: what stale callbacks are told apart by. The
  // epoch is node 0's, from the roster.
  std::uint64_t generation_ = 0;
  std::uint64_t epoch_ = 0;
  std::uint64_t next_epoch_ = 1;  // node 0: the epoch of the next roster

  // Node 0: the current attempt, and hellos that came between attempts.
  std::shared_ptr<Gathering> gathering_;
  struct Early {
    std::weak_ptr<PeerLink> link;
    peer_wire::PeerHello hello;
  };
  std::vector<Early> early_;

  // Formed ring.
  std::shared_ptr<PeerLink> coordinator_link_;           // workers
  std::vector<std::shared_ptr<PeerLink>> worker_links_;  // node 0, by node rank
  std::unique_ptr<execution::RingEngine> engine_;
  std::vector<std::unique_ptr<execution::RingEngine>> retired_;
  std::vector<std::string> peer_lanes_;
  std::uint64_t missed_wakeups_seen_ = 0;  // of engine_, added to the metric
  // The link metrics: what the data plane (UCX) and the control links moved,
  // by peer, as last added to the counters.
  struct LinkSample {
    std::string peer_address;
    std::shared_ptr<PeerLink> control;  // the control link to the peer, if this node has one
    std::uint64_t data_sent = 0, data_received = 0, busy_ns = 0, control_sent = 0, control_received = 0;
  };
  std::shared_ptr<transport::LinkCounters> link_counters_;
  std::vector<LinkSample> link_samples_;  // by peer
  Clock::time_point last_link_sample_;
};

}  // namespace ringsync::service::formation
