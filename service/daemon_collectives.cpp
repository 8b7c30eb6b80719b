// Running matched collectives, answering every rank, and the deadlines
// (stall inspector, collective timeout).
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <cstdio>

#include "common/log.h"
#include "service/daemon.h"

#include "service/formation/control_tls.h"
#include "service/device/service.h"
#include "service/collective/local_collective.h"
#include "service/route/route.h"

namespace ringsync::service {
namespace asio = boost::asio;

namespace {

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// "3.042 s", for messages about waits.
std::string elapsed_text(Clock::duration d) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f s", std::chrono::duration<double>(d).count());
  return text;
}

std::uint64_t payload_bytes(const wire::Collective& c, std::size_t ranks) {
  return wire::extent(c.kind, c.count, ranks).payload() * dtype_size(c.dtype);
}

}  // namespace

void Daemon::observe_rank_wait(const local::PendingCollective& collective) {
  const local::Submission* last = nullptr;
  for (const auto& s : collective.submissions) {
    metrics_.rank_wait.with({collective.job_id, std::to_string(s.local_rank)})
        .observe(seconds_between(collective.first_submit, s.submitted));
    if (!last || s.submitted > last->submitted) last = &s;
  }
  if (last && collective.submissions.size() > 1)
    metrics_.rank_last.with({collective.job_id, std::to_string(last->local_rank)}).inc();
  if (timeline_)
    timeline_->phase(collective.name, "WAIT_FOR_RANKS", collective.first_submit, Clock::now());
}

void Daemon::execute(local::PendingCollective collective) {
  const Clock::time_point ready = Clock::now();

  Status agreed = local::check_agreement(collective);
  if (!agreed.ok()) {
    RS_LOG(warn, "collective") << agreed.message();
    fail(collective, agreed, observe::ErrorKind::kMismatch);
    return;
  }
  const wire::Collective& first = collective.submissions.front().request;
  route::Query query;
  query.kind = first.kind;
  query.bytes = payload_bytes(first, 1);
  query.local_work_bytes = route::local_work_bytes(first.kind, first.count, first.dtype, collective.submissions.size());
  query.device = first.memory == wire::Memory::kDevice;
  const route::Route route = route::choose(route::Stage::kOnNode, query, {});
  RS_LOG(trace, "collective") << "tensor '" << collective.name << "': " << route::path_name(route.path) << ", "
                              << route.why;
  if (route.path == route::Path::kLocalDevice) {
    devices().run_local(std::move(collective), [this, ready](local::PendingCollective& done,
                                                            const Status& status) {
      if (!status.ok())
        RS_LOG(warn, "device") << "tensor '" << done.name << "': " << status.message();
      finish(done, status, ready);
    });
    return;
  }
  if (route.path == route::Path::kLocalNothing) {
    finish(collective, Status::Ok(), ready);
    return;
  }
  auto work = std::make_shared<collective::LocalCollective>(local::plan_of(collective), config_.reduce_chunk_bytes);
  if (route.path == route::Path::kLocalInline) {
    for (std::size_t i = 0; i < work->pieces(); ++i) work->run_piece(i);
    finish(collective, Status::Ok(), ready);
    return;
  }
  auto shared = std::make_shared<local::PendingCollective>(std::move(collective));
  pool_.run(
      work->pieces(), [work](std::size_t i) { work->run_piece(i); },
      [this, shared, ready] {
        asio::post(io_, [this, shared, ready] {
          finish(*shared,
                 pool_.cancelled() ? Status::Closed("ringsyncd shut down during the collective")
                                   : Status::Ok(),
                 ready);
        });
      });
}

void Daemon::finish(local::PendingCollective& collective, const Status& status,
                    Clock::time_point ready, std::size_t job_ranks) {
  const wire::Collective& first = collective.submissions.front().request;
  const std::size_t ranks = job_ranks ? job_ranks : collective.submissions.size();
  metrics_.collective_done(collective.job_id, first.kind, first.dtype, observe::status_label(status.code()),
                           payload_bytes(first, ranks), seconds_between(ready, Clock::now()),
                           ranks, first.memory == wire::Memory::kDevice);
  if (timeline_ && job_ranks == 0) timeline_->phase(collective.name, "LOCAL_COLLECTIVE", ready, Clock::now());
  for (auto& s : collective.submissions) s.complete(status);
  // The ranks' next small request is due soon.
  busy_.extend_for(payload_bytes(first, 1));
  RS_LOG(trace, "collective") << "tensor '" << collective.name << "' done: "
                                   << status.to_string();
}

void Daemon::fail(local::PendingCollective& collective, const Status& status, observe::ErrorKind kind) {
  metrics_.error(observe::resolve(kind, status));
  const wire::CollectiveKind op = collective.submissions.empty() ? wire::CollectiveKind::kAllreduce
                                                                 : collective.submissions.front().request.kind;
  metrics_.collectives.with({collective.job_id, wire::collective_kind_name(op), observe::status_label(status.code())})
      .inc();
  for (auto& s : collective.submissions) s.complete(status);
}

Status Daemon::start_cluster() {
  if (!config_.cluster.timeline_path.empty()) {
    // "{node}" in the path becomes the node rank, so daemons sharing a
    // directory (ringsync launch) write one file each.
    std::string path = config_.cluster.timeline_path;
    for (auto at = path.find("{node}"); at != std::string::npos; at = path.find("{node}"))
      path.replace(at, 6, std::to_string(config_.cluster.node_rank));
    auto timeline = observe::Timeline::open(path, config_.cluster.node_rank);
    if (!timeline.ok()) return timeline.status();
    timeline_ = std::move(timeline).value();
  }
  std::string control = config_.cluster.control_address;
  if (control.empty() && config_.cluster.enabled() && config_.cluster.node_rank == 0 &&
      config_.cluster.nodes.size() > 1)
    control = cluster::control_address(config_.cluster.nodes[0]);
  if (!control.empty()) {
    formation::ControlListener::Options options{config_.client_handshake_timeout, config_.cluster.join_timeout,
                                              config_.cluster.tls, [this] { metrics_.error(observe::ErrorKind::kAuth); }};
    auto listener = formation::ControlListener::open(io_, control, std::move(options));
    if (!listener.ok()) return listener.status();
    control_ = std::move(listener).value();
    RS_LOG(info, "ring") << "listening for the other nodes of multi-node jobs on " << control_->address()
                         << (config_.cluster.tls ? " (mutual TLS, certificate " + config_.cluster.tls->subject() + ")"
                                                 : std::string(" (plain text)"));
  }
  if (!config_.control_cpus.empty()) {
    // Asio looks names up on a helper thread it starts at the first
    // asynchronous lookup, which joining a job's node 0 makes. A numeric
    // lookup now (no network, no wait) starts it before the daemon keeps this
    // thread on --control-cpus, so it runs on every CPU of the daemon like
    // the other helpers (service/threads/thread_cpus.h).
    auto resolver = std::make_shared<asio::ip::tcp::resolver>(io_);
    resolver->async_resolve("127.0.0.1", "0",
                            asio::ip::tcp::resolver::numeric_host | asio::ip::tcp::resolver::numeric_service,
                            [resolver](const boost::system::error_code&, const asio::ip::tcp::resolver::results_type&) {});
  }
  if (!config_.cluster.enabled()) return Status::Ok();
  cluster::JobSpec job;
  job.id = config_.cluster.job_id;
  job.token = config_.cluster.token;
  job.slots = config_.cluster.slots();
  job.num_nodes = static_cast<std::uint32_t>(config_.cluster.nodes.size());
  job.node_rank = config_.cluster.node_rank;
  job.nodes = config_.cluster.nodes;
  job.preconfigured = true;
  auto ring = make_ring(std::move(job));
  RINGSYNC_RETURN_IF_ERROR(ring->start());
  rings_[config_.cluster.job_id] = HostedRing{std::move(ring), std::nullopt};
  return Status::Ok();
}

void Daemon::sweep() {
  const Clock::time_point now = Clock::now();
  // Metrics misused at run time are ignored (metrics.h); say so once per new batch.
  if (const std::uint64_t misused = metrics::misuse_count(); misused > misuse_reported_) {
    RS_LOG(error, "metrics") << (misused - misuse_reported_)
                             << " metric update(s) ignored as invalid (a bug: please report it); the first: "
                             << metrics::first_misuse();
    for (std::uint64_t i = misuse_reported_; i < misused; ++i) metrics_.error(observe::ErrorKind::kInternal);
    misuse_reported_ = misused;
  }
  std::size_t stalled = 0;
  for (auto& [id, job] : jobs_) {
    for (auto& pending : job.take_expired(now, config_.collective_timeout)) {
      const auto missing = pending.missing_ranks();
      Status timeout = Status::Timeout(
          "tensor '" + pending.name + "' of job '" + id + "' timed out after " +
          elapsed_text(now - pending.first_submit) + ": local rank(s) " +
          local::rank_list(missing) + " never submitted it (--collective-timeout)");
      RS_LOG(warn, "collective") << timeout.message();
      fail(pending, timeout, observe::ErrorKind::kTimeout);
    }
    for (auto& [name, pending] : job.pending()) {
      if (now - pending.first_submit < config_.stall_warning) continue;
      ++stalled;
      if (pending.stall_reported) continue;
      pending.stall_reported = true;
      metrics_.stall_reports.with({id}).inc();
      RS_LOG(warn, "stall") << "tensor '" << name << "' of job '" << id
                            << "' is waiting for local rank(s) "
                            << local::rank_list(pending.missing_ranks()) << "; submitted by "
                            << local::rank_list(pending.present_ranks()) << " "
                            << elapsed_text(now - pending.first_submit) << " ago";
    }
  }
  for (auto& [id, hosted] : rings_)
    stalled += hosted.ring->sweep(now, config_.stall_warning, config_.collective_timeout);
  std::erase_if(retiring_, [](const auto& ring) { return ring->done(); });
  check_liveness(now);
  forget_ended_jobs(now);
  metrics_.stalled_tensors.with().set(static_cast<double>(stalled));
}

void Daemon::update_gauges() {
  metrics_.clients.with().set(static_cast<double>(sessions_.size()));
  metrics_.jobs.with().set(static_cast<double>(jobs_.size()));
}

}  // namespace ringsync::service
