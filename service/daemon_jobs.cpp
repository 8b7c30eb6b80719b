// The jobs a daemon serves: hellos that join or describe them, their rings,
// ranks that leave, die or stop, and jobs that end.
#include <boost/asio/post.hpp>
#include <fstream>

#include "common/log.h"
#include "common/units.h"
#include "common/version.h"
#include "service/daemon.h"
#include "service/device/service.h"
#include "service/local/admission.h"

namespace ringsync::service {

namespace asio = boost::asio;

namespace {

// Whether the process is stopped (SIGSTOP, a tracer's stop), from
// /proc/PID/stat: "PID (COMM) STATE ...", COMM may hold spaces and parentheses.
bool process_stopped(std::int32_t pid) {
  if (pid <= 0) return false;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return false;
  const auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return false;
  const char state = line[close + 2];
  return state == 'T' || state == 't';
}

}  // namespace

cluster::JobRing* Daemon::ring_of(const std::string& job_id) {
  auto it = rings_.find(job_id);
  return it == rings_.end() ? nullptr : it->second.ring.get();
}

Status Daemon::on_hello(const std::shared_ptr<local::ClientSession>& session, const wire::Hello& hello) {
  if (session->membership) return Status::ProtocolError("a second hello on one connection");
  auto refuse = [&](Status status) {
    RS_LOG(info, "session") << "client " << session->id() << " (pid " << hello.pid
                            << ") refused: " << status.message();
    metrics_.error(observe::ErrorKind::kHelloRefused);
    session->send(wire::HelloReply{status, wire::kProtocolVersion, kVersion});
    session->close_after_flush();
    return Status::Ok();
  };
  if (Status checked = local::check_hello(hello, config_.max_job_ranks, kVersion); !checked.ok())
    return refuse(checked);
  const local::Credentials& who = session->credentials();
  if (local::Admitted admitted = local::admit({config_.access, kept_, jobs_, config_.max_jobs}, hello.job_id, who);
      !admitted.status.ok()) {
    if (admitted.about_who) metrics_.error(observe::ErrorKind::kAuth);
    return refuse(admitted.status);
  }

  cluster::JobRing* ring = ring_of(hello.job_id);
  const bool undescribed = hello.num_nodes == 0 && hello.nodes.empty() && hello.rendezvous.empty();
  if (config_.cluster.enabled() && !ring && undescribed)
    // Most likely a trainer of the pre-configured job with the wrong id:
    // serving it alone would compute node-local results.
    return refuse(Status::InvalidArgument(
        "this ringsyncd is node " + std::to_string(config_.cluster.node_rank) + " of multi-node job '" +
        config_.cluster.job_id + "', not job '" + hello.job_id + "'; set RINGSYNC_JOB_ID=" + config_.cluster.job_id +
        " (or RINGSYNC_NUM_NODES=1 for a job of this node alone)"));
  if (ring && ring->job().preconfigured) {
    const cluster::JobSpec& job = ring->job();
    if (hello.local_size != job.slots)
      return refuse(Status::InvalidArgument(
          "multi-node job '" + job.id + "' has " + std::to_string(job.slots) +
          " slots per node but this client says local size " + std::to_string(hello.local_size) +
          "; set RINGSYNC_LOCAL_SIZE=" + std::to_string(job.slots)));
    if ((hello.num_nodes != 0 && hello.num_nodes != job.num_nodes) ||
        (hello.node_rank >= 0 && static_cast<std::uint32_t>(hello.node_rank) != job.node_rank))
      return refuse(Status::InvalidArgument(
          "this ringsyncd is node " + std::to_string(job.node_rank) + " of " + std::to_string(job.num_nodes) +
          " of job '" + job.id + "' (its --hostfile and --node-rank), but this client says node " +
          std::to_string(hello.node_rank) + " of " + std::to_string(hello.num_nodes) +
          "; connect to the right node's daemon, or fix RINGSYNC_NODE_RANK / RINGSYNC_NUM_NODES"));
  } else {
    auto described = local::describe_job(hello, local::JobDefaults{config_.cluster.rendezvous,
                                                     control_ ? control_->port() : std::uint16_t{0}});
    if (!described.ok()) return refuse(described.status());
    if (described->spec.num_nodes > 1 || ring) {
      auto found = ring_for(*described);
      if (!found.ok()) return refuse(found.status());
      ring = *found;
    }
  }

  auto [it, created] = jobs_.try_emplace(hello.job_id, hello.job_id, hello.local_size);
  if (created) it->second.owner_uid = who.uid;
  forget_metrics_at_.erase(hello.job_id);
  kept_.job_back(hello.job_id);
  Status joined = it->second.join(hello.local_rank, hello.local_size, hello.pid);
  if (!joined.ok()) {
    if (created) jobs_.erase(it);
    if (ring) asio::post(io_, [this, id = hello.job_id] { maybe_release(id); });
    return refuse(joined);
  }
  session->membership = local::ClientSession::Membership{hello.job_id, hello.local_rank, hello.pid};
  if (ring) ring->set_local_ranks(it->second.connected());
  metrics_.jobs.with().set(static_cast<double>(jobs_.size()));
  // Series a dashboard reads exist from the job's (and the rank's) start.
  if (created) metrics_.stall_reports.with({hello.job_id}).inc(0);
  metrics_.rank_last.with({hello.job_id, std::to_string(hello.local_rank)}).inc(0);
  RS_LOG(info, "session") << "client " << session->id() << " (pid " << hello.pid << ") joined job '"
                          << hello.job_id << "' as local rank " << hello.local_rank << " of " << hello.local_size;
  if (ring && !ring->registered()) {
    // The reply says which node this is: it waits for the rendezvous.
    awaiting_rank_[hello.job_id].push_back({session, hello.shm_channel});
    return Status::Ok();
  }
  answer_hello(session, hello.shm_channel, ring);
  return Status::Ok();
}

std::string Daemon::advertised_address() const {
  if (!config_.cluster.advertise_address.empty()) return config_.cluster.advertise_address;
  if (!control_) return "";
  const std::string& address = control_->address();
  const std::string host = address.substr(0, address.rfind(':'));
  if (host == "0.0.0.0" || host == "[::]" || host == "::" || host.empty()) return "";
  return address;
}

void Daemon::on_registered(const std::string& job_id, const Status& outcome) {
  auto waiting = std::move(awaiting_rank_[job_id]);
  awaiting_rank_.erase(job_id);
  cluster::JobRing* ring = ring_of(job_id);
  if (auto lost = lost_at_.find(job_id); lost != lost_at_.end()) {
    if (outcome.ok() && ring) {
      const auto took = Clock::now() - lost->second;
      metrics_.ring_recovery.with({job_id}).set(std::chrono::duration<double>(took).count());
      RS_LOG(info, "ring") << "job '" << job_id << "' has its next run " << units::format_seconds(took)
                           << " after its last one was lost: this node is node " << ring->node_rank() << " of "
                           << ring->num_nodes();
    }
    lost_at_.erase(lost);
  }
  for (auto& w : waiting) {
    auto session = w.session.lock();
    if (!session || session->closed() || !session->membership) continue;
    if (outcome.ok() && ring) {
      answer_hello(session, w.wants_channel, ring);
      continue;
    }
    RS_LOG(info, "session") << "client " << session->id() << " refused: " << outcome.message();
    metrics_.error(observe::ErrorKind::kHelloRefused);
    if (auto job = jobs_.find(job_id); job != jobs_.end()) {
      job->second.leave(session->membership->local_rank);
      if (job->second.connected() == 0) jobs_.erase(job);
    }
    session->membership.reset();
    session->send(wire::HelloReply{outcome, wire::kProtocolVersion, kVersion});
    session->close_after_flush();
  }
  if (!outcome.ok()) asio::post(io_, [this, job_id] { maybe_release(job_id); });
}

void Daemon::answer_hello(const std::shared_ptr<local::ClientSession>& session, bool wants_channel, cluster::JobRing* ring) {
  wire::HelloReply reply{Status::Ok(), wire::kProtocolVersion, kVersion};
  if (ring) {
    reply.node_rank = ring->node_rank();
    reply.num_nodes = ring->num_nodes();
  }
  if (config_.rank_liveness_timeout.count() > 0)
    reply.heartbeat_ms = static_cast<std::uint32_t>(std::max<std::int64_t>(
        1, std::chrono::duration_cast<std::chrono::milliseconds>(config_.rank_liveness_timeout / 4).count()));
  if (wants_channel && config_.shm_channel) {
    if (Status opened = session->open_channel(); opened.ok()) {
      session->send_channel_offer(reply);
      channels_.push_back(session);
      session->hello_answered();
      return;
    } else {
      RS_LOG(warn, "session") << "client " << session->id() << ": no shared-memory channel ("
                              << opened.message() << "); its frames use the socket";
    }
  }
  session->send(reply);
  session->hello_answered();
}

Result<cluster::JobRing*> Daemon::ring_for(const local::DescribedJob& described) {
  const std::string& id = described.spec.id;
  if (auto it = rings_.find(id); it != rings_.end()) {
    auto local = jobs_.find(id);
    if (local != jobs_.end() && local->second.connected() > 0) {
      const std::string mismatch =
          it->second.described ? local::description_mismatch(*it->second.described, described) : std::string();
      if (!mismatch.empty())
        return Status::InvalidArgument("job '" + id + "': " + mismatch +
                                       "; start every rank of a job with the same environment");
      return it->second.ring.get();
    }
    // The ring of an earlier run, whose ranks have all gone: the new run
    // gets a ring of its own.
    it->second.ring->stop(Status::Closed("job '" + id + "' started again on this node"),
                          Status::Closed(cluster::node_name(it->second.ring->job(), it->second.ring->node_rank()) +
                                         " of job '" + id + "' started the job again"));
    retiring_.push_back(std::move(it->second.ring));
    rings_.erase(it);
  }
  if (described.spec.num_nodes == 1) return nullptr;
  cluster::JobSpec spec = described.spec;
  if (!spec.rendezvous.empty()) {
    // Any node may be node 0, and the others learn its address from the store.
    if (!control_)
      return Status::InvalidArgument("job '" + id + "' finds its nodes through " + spec.rendezvous +
                                     ", so this ringsyncd must listen for them: start it with --control-address "
                                     "HOST:PORT");
    spec.self_address = advertised_address();
    if (spec.self_address.empty())
      return Status::InvalidArgument("job '" + id + "' finds its nodes through " + spec.rendezvous +
                                     ", but this ringsyncd listens on " + control_->address() +
                                     ", which the other nodes cannot connect to: start it with "
                                     "--advertise-address HOST:PORT");
    spec.node_rank_known = described.rank_known;
  }
  auto ring = make_ring(std::move(spec));
  Status started = ring->start();
  if (!started.ok()) return started;
  cluster::JobRing* raw = ring.get();
  rings_[id] = HostedRing{std::move(ring), described};
  return raw;
}

std::unique_ptr<cluster::JobRing> Daemon::make_ring(cluster::JobSpec spec) {
  cluster::JobRing::Hooks hooks;
  const std::string id = spec.id;
  hooks.ring_lost = [this, id](const Status& why) { on_ring_lost(id, why); };
  hooks.finished = [this, id] { asio::post(io_, [this, id] { maybe_release(id); }); };
  hooks.registered = [this, id](const Status& outcome) { on_registered(id, outcome); };
  cluster::Answers& answers = *this;
  return std::make_unique<cluster::JobRing>(io_, std::move(spec), config_.cluster, control_.get(), pool_, metrics_,
                                            timeline_.get(), answers, std::move(hooks));
}

std::string Daemon::rank_name(const local::ClientSession& session) const {
  const auto& who = *session.membership;
  auto it = rings_.find(who.job_id);
  if (it == rings_.end())
    return "local rank " + std::to_string(who.local_rank) + " (pid " + std::to_string(who.pid) + ") of job '" +
           who.job_id + "'";
  const cluster::JobSpec& job = it->second.ring->job();
  const std::uint64_t global = std::uint64_t{job.node_rank} * job.slots + who.local_rank;
  return "rank " + std::to_string(global) + " of job '" + who.job_id + "' (" + cluster::node_at(job, job.node_rank) +
         ", local rank " + std::to_string(who.local_rank) + ", pid " + std::to_string(who.pid) + ")";
}

void Daemon::rank_left(const local::ClientSession& session, const Status& why, bool clean) {
  const auto& who = *session.membership;
  cluster::JobRing* ring = ring_of(who.job_id);
  if (!ring) return;
  ring->rank_left(ring->node_rank() * ring->slots() + who.local_rank, why, clean);
}

void Daemon::on_disconnect(const std::shared_ptr<local::ClientSession>& session) {
  if (sessions_.erase(session->id()) == 0) return;  // already handled
  std::erase(channels_, session);
  if (stopping_ && sessions_.empty()) io_.stop();
  metrics_.clients.with().set(static_cast<double>(sessions_.size()));
  const std::uint64_t buffer_bytes = session->buffers.total_bytes();
  metrics_.registered_bytes.with({"host"}).dec(static_cast<double>(buffer_bytes));
  session->buffers.clear();
  if (devices_) devices_->forget(*session);
  session->close_after_flush();
  if (!session->membership) return;
  const auto& who = *session->membership;
  RS_LOG(info, "session") << "client " << session->id() << " (pid " << who.pid << ", local rank " << who.local_rank
                          << " of job '" << who.job_id << "') disconnected";
  auto job_it = jobs_.find(who.job_id);
  if (job_it == jobs_.end()) return;
  local::Job& job = job_it->second;
  job.add_buffer_bytes(-static_cast<std::int64_t>(buffer_bytes));
  cluster::JobRing* ring = ring_of(who.job_id);
  if (!ring) {
    auto orphaned = job.leave(who.local_rank);
    for (auto& pending : orphaned)
      fail(pending,
           Status::PeerLost("local rank " + std::to_string(who.local_rank) + " (pid " + std::to_string(who.pid) +
                            ") of job '" + who.job_id + "' disconnected while tensor '" + pending.name +
                            "' was pending"),
           observe::ErrorKind::kClientLost);
  } else {
    // Every rank of the job, on every node, gets this first line.
    const std::size_t unfinished = session->liveness.outstanding.size();
    const std::string how =
        unfinished > 0 ? " disconnected with " + std::to_string(unfinished) +
                             " collective(s) unfinished (it died, or exited without waiting for them)"
        : session->liveness.left ? " left the job (rs_disconnect)"
                                 : " is gone: its connection closed (the process exited or was killed)";
    const Status why = Status::PeerLost(rank_name(*session) + how);
    for (auto& pending : job.leave(who.local_rank, why.message())) fail(pending, why, observe::ErrorKind::kClientLost);
    if (!session->liveness.reported) rank_left(*session, why, unfinished == 0 && session->liveness.left);
    ring->set_local_ranks(job.connected());
  }
  if (job.connected() == 0) jobs_.erase(job_it);
  metrics_.jobs.with().set(static_cast<double>(jobs_.size()));
  if (ring) maybe_release(who.job_id);
  job_gone(who.job_id);
}

void Daemon::job_gone(const std::string& job_id) {
  if (jobs_.count(job_id) || rings_.count(job_id)) return;
  forget_metrics_at_[job_id] = Clock::now() + config_.job_metrics_linger;
  kept_.job_gone(job_id, Clock::now() + config_.kept_state_linger);
}

void Daemon::forget_ended_jobs(Clock::time_point now) {
  if (const std::size_t dropped = kept_.forget_expired(now); dropped > 0) {
    RS_LOG(info, "session") << dropped << " kept state(s) of ended jobs dropped (--kept-state-linger)";
    metrics_.kept_state_bytes.with().set(static_cast<double>(kept_.bytes()));
  }
  for (auto it = forget_metrics_at_.begin(); it != forget_metrics_at_.end();) {
    if (now < it->second || jobs_.count(it->first) || rings_.count(it->first)) {
      ++it;
      continue;
    }
    metrics_.forget_job(it->first);
    lost_at_.erase(it->first);
    RS_LOG(debug, "metrics") << "the series of job '" << it->first << "' are gone from /metrics";
    it = forget_metrics_at_.erase(it);
  }
}

void Daemon::on_ring_lost(const std::string& job_id, const Status& why) {
  lost_at_.try_emplace(job_id, Clock::now());
  auto it = jobs_.find(job_id);
  if (it != jobs_.end() && it->second.connected() > 0)
    for (auto& pending : it->second.break_with(why.message())) fail(pending, why, observe::ErrorKind::kPeerLost);
  asio::post(io_, [this, job_id] { maybe_release(job_id); });
}

void Daemon::maybe_release(const std::string& job_id) {
  auto it = rings_.find(job_id);
  if (it == rings_.end() || stopping_) return;
  cluster::JobRing& ring = *it->second.ring;
  if (ring.job().preconfigured || jobs_.count(job_id) > 0) return;
  // A formed ring whose run is being closed waits for node 0 (JobRing::sweep
  // bounds the wait); anything else goes now.
  if (ring.formed()) return;
  RS_LOG(debug, "ring") << "job '" << job_id << "' has no ranks here any more; its ring is released";
  ring.stop(Status::Closed("job '" + job_id + "' ended on this node"),
            Status::Closed(cluster::node_name(ring.job(), ring.node_rank()) + " of job '" + job_id + "' ended"));
  retiring_.push_back(std::move(it->second.ring));
  rings_.erase(it);
  job_gone(job_id);
}

void Daemon::check_liveness(Clock::time_point now) {
  const auto timeout = config_.rank_liveness_timeout;
  if (timeout.count() <= 0) return;
  for (auto& [id, session] : sessions_) {
    if (!session->membership || session->liveness.reported) continue;
    auto& live = session->liveness;
    const auto silent = now - live.heard;
    if (silent < std::chrono::milliseconds(500)) {
      live.stopped_since.reset();
      continue;
    }
    std::optional<std::string> verdict;
    if (process_stopped(session->peer_pid())) {
      if (!live.stopped_since) live.stopped_since = now;
      if (now - *live.stopped_since >= timeout)
        verdict = " is stopped: its process has been stopped (SIGSTOP, or a debugger) for " +
                  units::format_seconds(now - *live.stopped_since) + " (--rank-liveness-timeout)";
    } else {
      live.stopped_since.reset();
      if (live.waiting_for != 0 && live.outstanding.count(live.waiting_for) > 0 && silent >= timeout)
        verdict = " stopped answering: it waits for a collective but sent no heartbeat for " + units::format_seconds(silent) +
                  " (--rank-liveness-timeout)";
    }
    if (!verdict) continue;
    live.reported = true;
    const Status why = Status::PeerLost(rank_name(*session) + *verdict);
    RS_LOG(warn, "session") << why.message();
    metrics_.error(observe::ErrorKind::kRankUnresponsive);
    auto job = jobs_.find(session->membership->job_id);
    if (job != jobs_.end())
      for (auto& pending : job->second.break_with(why.message())) fail(pending, why, observe::ErrorKind::kClientLost);
    rank_left(*session, why);
  }
}

}  // namespace ringsync::service
