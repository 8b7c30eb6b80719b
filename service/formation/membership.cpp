// Forming a job's ring, and tearing it down when a node is lost.
#include "service/formation/membership.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/log.h"
#include "service/formation/control_listener.h"
#include "service/formation/local_network.h"
#include "service/formation/peer_auth.h"
#include "service/threads/thread_cpus.h"
#include "service/transport/test_drop.h"

namespace ringsync::service::formation {

namespace asio = boost::asio;

namespace {
// Pause between a failed or lost ring and the next attempt, so that a node
// that keeps failing does not spin, and the others notice the loss first.
constexpr auto kReformPause = std::chrono::milliseconds(200);
constexpr auto kMaxReformPause = std::chrono::milliseconds(5000);
}  // namespace

Membership::Membership(asio::io_context& io, cluster::JobSpec& job, const cluster::ClusterConfig& settings, ControlListener* listener,
                       std::unique_ptr<DataPlane> data_plane, observe::DaemonMetrics& metrics, Hooks hooks,
                       std::shared_ptr<rendezvous::Rendezvous> rendezvous)
    : io_(io),
      job_(job),
      rendezvous_(std::move(rendezvous)),
      settings_(settings),
      listener_(listener),
      data_plane_(std::move(data_plane)),
      metrics_(metrics),
      hooks_(std::move(hooks)),
      wake_formation_(io),
      suspicion_(io) {}

Membership::~Membership() = default;

Status Membership::start() {
  metrics_.ring_nodes.with({job_.id}).set(0);  // until the ring forms
  if (job_.node_rank == 0 && job_.num_nodes > 1) {
    if (!listener_)
      return Status::InvalidArgument("this ringsyncd is node 0 of job '" + job_.id +
                                     "' but has no control port for the other nodes; start it with "
                                     "--control-address HOST:PORT");
    std::weak_ptr<Membership> weak = weak_from_this();
    route_ = listener_->route(job_.id, [weak](const std::shared_ptr<PeerLink>& link, const peer_wire::PeerHello& hello) {
      if (auto self = weak.lock()) self->on_hello(link, hello);
    });
  }
  started_ = true;
  asio::co_spawn(io_, formation_loop(shared_from_this()), asio::detached);
  return Status::Ok();
}

void Membership::stop(const Status& why) {
  if (stopping_) return;
  stopping_ = true;
  if (listener_ && route_) listener_->unroute(job_.id, route_);
  sample_links(Clock::now());  // what moved since the last sweep counts too
  // The other nodes learn which node went away.
  if (formed_) lose(why, static_cast<std::int32_t>(job_.node_rank));  // no hook runs once stopping
  stop_->request();
  wake_formation_.cancel();
  for (auto& e : early_)
    if (auto link = e.link.lock()) link->close(why);
  early_.clear();
}

bool Membership::settled() const {
  // The formation coroutine refers to the job: it must have ended first.
  if (stopping_ && started_ && !ended_) return false;
  for (const auto& engine : retired_)
    if (engine->outstanding() > 0) return false;
  return !engine_ || engine_->outstanding() == 0;
}

BootstrapConfig Membership::bootstrap_config(std::vector<std::uint8_t> ucx_address) const {
  BootstrapConfig bc;
  bc.job_id = job_.id;
  bc.token = job_.token;
  bc.node_rank = job_.node_rank;
  bc.slots = job_.slots;
  bc.nodes = job_.nodes;
  bc.ucx_address = std::move(ucx_address);
  bc.join_timeout = settings_.join_timeout;
  bc.epoch = next_epoch_;
  bc.ring = settings_.ring;
  // The bootstrap ends before this membership does (it is awaited in formation_loop).
  bc.on_auth_failure = [&metrics = metrics_] { metrics.error(observe::ErrorKind::kAuth); };
  bc.tls = settings_.tls;
  return bc;
}

asio::awaitable<void> Membership::formation_loop(std::shared_ptr<Membership> /*keepalive*/) {
  // Attempts that fail (a node refuses this one, or never comes) back off, so
  // a misconfigured node does not flood the logs of both.
  auto pause = kReformPause;
  while (!stopping_) {
    Status failed = Status::Ok();
    {
      // Who is in the job (the node list, or the store's); node 0 numbers the ring.
      auto members = co_await rendezvous_->members(std::chrono::steady_clock::now() + settings_.join_timeout);
      if (stopping_) break;
      if (members.ok()) {
        job_.nodes = std::move(members->nodes);
        if (job_.node_rank == 0) {
          auto epoch = co_await rendezvous_->next_epoch();
          if (stopping_) break;
          if (epoch.ok()) next_epoch_ = *epoch;
          else failed = epoch.status();
        }
      } else {
        failed = members.status();
      }
    }
    auto address = failed.ok() ? data_plane_->open() : Result<std::vector<std::uint8_t>>(failed);
    if (!address.ok()) {
      failed = address.status();
    } else {
      BootstrapConfig bc = bootstrap_config(std::move(address).value());
      Result<Joined> joined = Status::Closed("not started");
      if (job_.node_rank == 0) {
        gathering_ = std::make_shared<Gathering>(io_.get_executor(), bc);
        for (auto& e : std::exchange(early_, {}))
          if (auto link = e.link.lock(); link && !link->closed()) gathering_->offer(link, e.hello);
        joined = co_await gathering_->wait(stop_);
        gathering_.reset();
      } else {
        joined = co_await join(bc, stop_);
      }
      if (stopping_) {
        if (joined.ok()) {
          for (auto& link : joined->workers)
            if (link) link->close(Status::Closed("ringsyncd is shutting down"));
          if (joined->coordinator) joined->coordinator->close(Status::Closed("ringsyncd is shutting down"));
        }
        break;
      }
      failed = joined.ok() ? form(std::move(joined).value()) : joined.status();
    }
    if (stopping_) break;
    boost::system::error_code ec;
    if (!failed.ok()) {
      pause = std::min<std::chrono::milliseconds>(pause * 2, kMaxReformPause);
      RS_LOG(warn, "ring") << "forming the ring of job '" << job_.id << "' failed: " << failed.message()
                           << "; trying again";
      metrics_.error(observe::ErrorKind::kRingFormation);
      if (hooks_.attempt_failed && !stopping_) hooks_.attempt_failed(failed);
    } else {
      pause = kReformPause;
      // Formed: sleep until lose() wakes us.
      wake_formation_.expires_at(asio::steady_timer::time_point::max());
      co_await wake_formation_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      if (stopping_ || !reform_) break;
    }
    wake_formation_.expires_after(pause);
    co_await wake_formation_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  ended_ = true;
  if (listener_ && route_) listener_->unroute(job_.id, route_);
}

Status Membership::form(Joined joined) {
  const int n = static_cast<int>(job_.num_nodes);
  // Every node derives the same key from the roster; outsiders cannot.
  const auto tag_key = data_plane_tag_key(job_.token, job_.id, joined.epoch, joined.ucx_addresses);
  auto transport = tag_key.ok() ? data_plane_->connect(static_cast<int>(job_.node_rank), joined.ucx_addresses, *tag_key)
                                : Result<std::unique_ptr<transport::Transport>>(tag_key.status());
  if (!transport.ok()) {
    for (auto& link : joined.workers)
      if (link) link->close(transport.status());
    if (joined.coordinator) joined.coordinator->close(transport.status());
    return transport.status();
  }
  describe_links(**transport);  // before the ring's thread owns the transport
  if (link_counters_) sample_links(Clock::now());  // the last ring's final bytes
  link_counters_ = std::make_shared<transport::LinkCounters>(n);
  link_samples_.assign(static_cast<std::size_t>(n), {});
  for (std::uint32_t peer = 0; peer < job_.num_nodes; ++peer) {
    if (peer < job_.nodes.size()) link_samples_[peer].peer_address = cluster::control_address(job_.nodes[peer]);
    if (job_.node_rank == 0 && peer < joined.workers.size()) link_samples_[peer].control = joined.workers[peer];
    if (job_.node_rank != 0 && peer == 0) link_samples_[peer].control = joined.coordinator;
  }
  last_link_sample_ = Clock::now();
  metrics_.peers_lost.with({job_.id}).inc(0);  // the series exist from the first ring on
  metrics_.missed_wakeups.with({job_.id}).inc(0);
  missed_wakeups_seen_ = 0;
  std::unique_ptr<transport::Transport> data = std::move(transport).value();
  if (auto drop = transport::drop_send(); drop && drop->node == job_.node_rank && n > 1) {
    RS_LOG(warn, "ring") << transport::kDropSendEnv << " is set: node " << job_.node_rank << " of job '" << job_.id
                         << "' drops its data-plane send number " << drop->nth
                         << " on purpose (a test hook; never set it outside tests)";
    data = std::make_unique<transport::DroppingTransport>(std::move(data), drop->nth);
  }
  auto counting = std::make_unique<transport::CountingTransport>(std::move(data), link_counters_);
  {
    threads::ThreadCpusScope spread(settings_.thread_cpus);  // the ring's thread
    engine_ = std::make_unique<execution::RingEngine>(
        std::move(counting), [&io = io_](std::function<void()> f) { asio::post(io, std::move(f)); },
        settings_.busy_poll);
  }

  ++generation_;
  epoch_ = joined.epoch;
  formed_ = true;
  const std::uint64_t generation = generation_;
  auto wire = [this, generation](std::uint32_t node, const std::shared_ptr<PeerLink>& link) {
    link->set_handlers(
        [this, node, generation](peer_wire::Message m) {
          if (formed_ && generation_ == generation) on_peer_message(node, std::move(m));
        },
        [this, node, generation, weak = std::weak_ptr<PeerLink>(link)](const Status& why) {
          auto self = weak.lock();
          if (formed_ && generation_ == generation && self) on_link_closed(node, why, *self);
        });
    link->start_heartbeats(settings_.heartbeat_interval, settings_.peer_timeout);
  };
  if (job_.node_rank == 0) {
    worker_links_ = std::move(joined.workers);
    for (std::uint32_t r = 1; r < worker_links_.size(); ++r)
      if (worker_links_[r]) wire(r, worker_links_[r]);
  } else {
    coordinator_link_ = std::move(joined.coordinator);
    wire(0, coordinator_link_);
  }
  metrics_.ring_epoch.with({job_.id}).set(static_cast<double>(epoch_));
  metrics_.ring_nodes.with({job_.id}).set(static_cast<double>(n));
  RS_LOG(info, "ring") << "ring of job '" << job_.id << "' formed: " << n << " node(s), epoch " << epoch_;
  if (hooks_.formed && !stopping_) hooks_.formed(epoch_);
  return Status::Ok();
}

void Membership::describe_links(const transport::Transport& transport) {
  metrics_.peer_transports.erase_where("job_id", job_.id);  // a new ring may have chosen other lanes
  peer_lanes_.assign(job_.num_nodes, "");
  std::string summary;
  for (std::uint32_t peer = 0; peer < job_.num_nodes; ++peer) {
    if (peer == job_.node_rank) continue;
    const std::string lanes = transport.peer_transports(static_cast<int>(peer));
    peer_lanes_[peer] = lanes;
    if (lanes.empty()) continue;
    const std::string address = peer < job_.nodes.size() ? cluster::control_address(job_.nodes[peer]) : "";
    const std::string avoided = data_plane_->link_note(static_cast<int>(peer));
    metrics_.peer_transports.with({job_.id, std::to_string(peer), address, lanes, avoided}).set(1);
    summary += (summary.empty() ? "" : "; ") + cluster::node_name(job_, peer) + " over " + lanes +
               (avoided.empty() ? "" : " (" + avoided + ")");
  }
  if (!summary.empty()) RS_LOG(info, "ucx") << "job '" << job_.id << "': " << summary;
}

void Membership::send(std::uint32_t node, const peer_wire::Message& message) {
  if (!formed_) return;
  if (job_.node_rank == 0) {
    if (node < worker_links_.size() && worker_links_[node]) worker_links_[node]->send(message);
  } else if (node == 0 && coordinator_link_) {
    coordinator_link_->send(message);
  }
}

std::string Membership::this_node() const { return "this node (" + cluster::node_at(job_, job_.node_rank) + ")"; }

void Membership::on_link_closed(std::uint32_t node, const Status& why, const PeerLink& link) {
  const auto self = static_cast<std::int32_t>(job_.node_rank);
  // The silence or the error may be this node's own doing: say so rather
  // than blame a healthy peer.
  if (link.own_stall().count() > 0) {
    lose(Status::PeerLost(this_node() + " of job '" + job_.id + "' did not run for " +
                          std::to_string(link.own_stall().count()) +
                          " ms (it was stopped, or starved of CPU); the other nodes declared it lost "
                          "and went on without it"),
         false, self,
         node_name(job_.node_rank) + " of job '" + job_.id + "' did not run for " +
             std::to_string(link.own_stall().count()) + " ms (it was stopped, or starved of CPU)");
    return;
  }
  if (auto interface = interface_down(link.local_address())) {
    lose(Status::PeerLost(this_node() + " of job '" + job_.id + "' is cut off: its network interface " +
                          *interface + " is down; the other nodes go on without it"),
         false, self, node_name(job_.node_rank) + " of job '" + job_.id + "' is cut off (its interface " + *interface + " is down)");
    return;
  }
  lose(Status::PeerLost(node_name(node) + " of job '" + job_.id + "' was lost: " + why.message()),
       static_cast<std::int32_t>(node));
}

void Membership::suspect(const Status& why) {
  if (!formed_) return;
  const std::uint64_t generation = generation_;
  suspicion_.expires_after(2 * settings_.peer_timeout);
  suspicion_.async_wait([this, generation, why, alive = weak_from_this()](boost::system::error_code ec) {
    if (ec || alive.expired() || !formed_ || generation_ != generation) return;
    lose(why);
  });
}

void Membership::on_peer_message(std::uint32_t from, peer_wire::Message message) {
  if (auto* goodbye = std::get_if<peer_wire::Goodbye>(&message)) {
    if (goodbye->finished && from == 0) {
      lose(Status::Closed(goodbye->reason), /*quiet=*/true, -1);
      return;
    }
    // Every node reports the first verdict as it was given (node 0 relays it).
    if (goodbye->lost_node == static_cast<std::int32_t>(job_.node_rank) ||
        goodbye->lost_node == peer_wire::kLostNodeYou) {
      lose(Status::PeerLost(this_node() + " of job '" + job_.id + "' was cut off or stopped: the other nodes " +
                            "declared it lost (" + goodbye->reason + ") and went on without it"),
           false, static_cast<std::int32_t>(job_.node_rank),
           node_name(job_.node_rank) + " of job '" + job_.id + "' was cut off or stopped");
      return;
    }
    if (goodbye->timed_out) {  // a deadline, not a loss: every node reports it as given
      lose(Status::Timeout(goodbye->reason), -1);
      return;
    }
    lose(Status::PeerLost(goodbye->reason), goodbye->lost_node >= 0 ? goodbye->lost_node
                                                                    : static_cast<std::int32_t>(from));
    return;
  }
  if (hooks_.message && !stopping_) hooks_.message(from, std::move(message));
}

void Membership::lose(const Status& why, std::int32_t lost_node) { lose(why, false, lost_node); }

void Membership::finish(const Status& why) {
  if (!formed_ || job_.node_rank != 0) return;
  lose(why, true, -1);  // its goodbyes say finished
}

void Membership::lose(const Status& why, bool quiet, std::int32_t lost_node, const std::string& told_others) {
  const Status told = told_others.empty() ? why : Status(why.code(), told_others);
  if (!formed_) return;
  formed_ = false;
  suspicion_.cancel();
  const char* next = reform_ && !stopping_ ? "forming the ring again" : "the ring is closed";
  if (quiet || why.code() == StatusCode::kClosed) {
    RS_LOG(info, "ring") << why.message() << "; " << next;
  } else {
    RS_LOG(error, "ring") << why.message() << "; failing the job's collectives; " << next;
  }
  metrics_.ring_nodes.with({job_.id}).set(0);
  if (!quiet && why.code() == StatusCode::kTimeout) {
    metrics_.error(observe::ErrorKind::kTimeout);  // a deadline ran out; no node was lost
  } else if (!quiet) {
    metrics_.peers_lost.with({job_.id}).inc();
    metrics_.error(observe::ErrorKind::kPeerLost);
  }
  // Tell the others first: the coordinator relays the reason to every worker.
  for (auto& link : worker_links_)
    if (link) link->goodbye(told, quiet, lost_node);
  if (coordinator_link_) coordinator_link_->goodbye(told, quiet, lost_node);
  worker_links_.clear();
  coordinator_link_.reset();
  // In-flight ring operations fail with `why` through their engine callbacks;
  // the engine lives until they have (settled()).
  if (engine_) {
    engine_->abort(why);
    retired_.push_back(std::move(engine_));
  }
  std::erase_if(retired_, [](const auto& engine) { return engine->outstanding() == 0; });
  if (hooks_.lost && !stopping_) hooks_.lost(why, quiet, lost_node);
  wake_formation_.cancel();
}

void Membership::on_hello(const std::shared_ptr<PeerLink>& link, const peer_wire::PeerHello& hello) {
  if (stopping_) {
    link->close(Status::Closed("the job is ending"));
  } else if (formed_) {
    on_late_hello(link, hello);
  } else if (gathering_ && !gathering_->finished()) {
    gathering_->offer(link, hello);
  } else {
    // Between attempts: the next one takes it (at most a few per node).
    std::erase_if(early_, [](const Early& e) {
      auto l = e.link.lock();
      return !l || l->closed();
    });
    if (early_.size() >= 2 * static_cast<std::size_t>(job_.num_nodes)) {
      link->close(Status::Closed("the ring is re-forming"));
      return;
    }
    early_.push_back({link, hello});
  }
}

void Membership::on_late_hello(const std::shared_ptr<PeerLink>& link, const peer_wire::PeerHello& hello) {
  BootstrapConfig bc = bootstrap_config({});
  std::string why = hello_refusal(bc, hello);
  // A killed daemon's connection closes at once (the ring is then already
  // re-forming), so a hello for a node whose link is alive comes from a second
  // daemon claiming the same rank: refuse it rather than break the ring.
  if (why.empty() && hello.node_rank < worker_links_.size() && worker_links_[hello.node_rank] &&
      !worker_links_[hello.node_rank]->closed())
    why = node_name(hello.node_rank) + " is already in the ring (two daemons with one node rank?)";
  if (!why.empty()) {
    RS_LOG(warn, "ring") << "refused " << link->peer_name() << ": " << why;
    metrics_.error(observe::ErrorKind::kPeerRefused);
    link->send(peer_wire::PeerHelloReply{false, why, 0, {}, 0});
    link->goodbye(Status::InvalidArgument(why));
    return;
  }
  // A node of this ring whose link is gone says hello again: form the ring
  // anew, and the next attempt takes this hello.
  early_.push_back({link, hello});
  lose(Status::PeerLost(node_name(hello.node_rank) + " of job '" + job_.id + "' restarted (it asked to join again)"),
       static_cast<std::int32_t>(hello.node_rank));
}

void Membership::sample_links(Clock::time_point now) {
  std::erase_if(retired_, [](const auto& engine) { return engine->outstanding() == 0; });
  if (engine_) {
    const std::uint64_t missed = engine_->missed_wakeups();
    if (missed > missed_wakeups_seen_) {
      metrics_.missed_wakeups.with({job_.id}).inc(static_cast<double>(missed - missed_wakeups_seen_));
      if (missed_wakeups_seen_ == 0) {
        std::string lanes;
        for (std::uint32_t peer = 0; peer < peer_lanes_.size(); ++peer)
          if (!peer_lanes_[peer].empty()) lanes += (lanes.empty() ? "" : "; ") + node_name(peer) + " over " + peer_lanes_[peer];
        RS_LOG(warn, "ucx") << "job '" << job_.id << "': the data plane found messages that had arrived without "
                            << "waking it (" << missed << " so far): the transport to its peers (" << lanes
                            << ") loses wake-ups, and each costs up to "
                            << execution::RingEngine::kInFlightSleep.count()
                            << " ms. Pin --ucx-transports tcp,self if it goes on (docs/ucx.md)";
      }
      missed_wakeups_seen_ = missed;
    }
  }
  if (!link_counters_) return;
  const double seconds = std::chrono::duration<double>(now - last_link_sample_).count();
  for (std::size_t peer = 0; peer < link_samples_.size(); ++peer) {
    if (peer == job_.node_rank) continue;
    LinkSample& last = link_samples_[peer];
    const std::uint64_t sent = link_counters_->sent[peer].load(std::memory_order_relaxed);
    const std::uint64_t received = link_counters_->received[peer].load(std::memory_order_relaxed);
    const std::uint64_t busy = link_counters_->send_busy_ns[peer].load(std::memory_order_relaxed);
    const std::uint64_t control_sent = last.control ? last.control->bytes_sent() : last.control_sent;
    const std::uint64_t control_received = last.control ? last.control->bytes_received() : last.control_received;
    const std::string label = std::to_string(peer);
    const auto add = [&](std::string_view direction, std::string_view plane, std::uint64_t now_value,
                         std::uint64_t before) {
      metrics_.link_bytes.with({job_.id, label, last.peer_address, direction, plane})
          .inc(static_cast<double>(now_value - before));
    };
    add("tx", "data", sent, last.data_sent);
    add("rx", "data", received, last.data_received);
    add("tx", "control", control_sent, last.control_sent);
    add("rx", "control", control_received, last.control_received);
    metrics_.link_send_busy.with({job_.id, label, last.peer_address})
        .inc(static_cast<double>(busy - last.busy_ns) * 1e-9);
    if (seconds > 0) {
      metrics_.link_bandwidth.with({job_.id, label, last.peer_address, "tx"})
          .set(static_cast<double>(sent - last.data_sent + control_sent - last.control_sent) / seconds);
      metrics_.link_bandwidth.with({job_.id, label, last.peer_address, "rx"})
          .set(static_cast<double>(received - last.data_received + control_received - last.control_received) /
               seconds);
    }
    last.data_sent = sent;
    last.data_received = received;
    last.busy_ns = busy;
    last.control_sent = control_sent;
    last.control_received = control_received;
  }
  last_link_sample_ = now;
}

}  // namespace ringsync::service::formation
