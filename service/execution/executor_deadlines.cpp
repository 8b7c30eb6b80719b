// The deadlines of running operations, and what each one waits for
// (executor.h; docs/cluster.md, "Deadlines").
#include <cstdio>

#include "common/log.h"

#include "service/execution/executor.h"

namespace ringsync::service::execution {

namespace {

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::string one_decimal(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f", value);
  return text;
}

}  // namespace

const char* Executor::phase_name(Phase phase) {
  switch (phase) {
    case Phase::kStageIn: return "GPU stage-in";
    case Phase::kGather: return "gather";
    case Phase::kDataPlane: return "data plane";
    case Phase::kCopyOut: return "copy-out";
    case Phase::kStageOut: return "GPU stage-out";
  }
  return "?";
}

std::string Executor::describe(const peer_wire::Operation& op) {
  std::string text(wire::collective_kind_name(op.kind));
  if (!op.names.empty()) text += " '" + op.names.front() + "'";
  if (op.names.size() > 1) text += " and " + std::to_string(op.names.size() - 1) + " more fused";
  return text + " (sequence " + std::to_string(op.sequence) + ")";
}

void Executor::enter(Running& running, Phase phase) {
  running.phase = phase;
  running.phase_since = Clock::now();
}

Executor::InFlight Executor::view(const Running& running, Clock::time_point now) const {
  const peer_wire::Operation& op = running.planned->op;
  InFlight v;
  v.sequence = op.sequence;
  v.kind = wire::collective_kind_name(op.kind);
  v.names = op.names;
  for (std::uint64_t count : op.counts) v.bytes += count * dtype_size(op.dtype);
  v.phase = phase_name(running.phase);
  v.age_seconds = seconds(now - running.started);
  v.phase_seconds = seconds(now - running.phase_since);
  const std::string here = cluster::node_name(job_, job_.node_rank);
  if (running.phase != Phase::kDataPlane || !running.watch) {
    v.summary = here + " is in its " + v.phase + " (for " + one_decimal(v.phase_seconds) +
                " s), work of this node's own: check its CPU and memory (the daemon's work pool copies)";
    return v;
  }
  const auto snapshot = running.watch->snapshot();
  v.algorithm = running.algorithm;
  if (running.failed || snapshot.messages_failed > 0) {
    v.summary = here + "'s " + v.algorithm + " failed (a message with a peer did): it waits for the ring's "
                "verdict, which names the node at fault";
    v.bytes_moved = snapshot.bytes_moved;
    return v;
  }
  v.bytes_moved = snapshot.bytes_moved;
  v.idle_seconds = seconds(now - snapshot.last_progress);
  v.waiting = snapshot.waiting;
  const std::string moved = " (" + std::to_string(v.bytes_moved) + " bytes sent and received so far, none for " +
                            one_decimal(v.idle_seconds) + " s)";
  if (!snapshot.waiting) {
    v.summary = here + "'s " + v.algorithm + " has no message outstanding" + moved +
                ": it waits for work of this node's own (the gather beside the ring, GPU copies): check its CPU";
    return v;
  }
  const auto& w = *snapshot.waiting;
  v.waiting_seconds = seconds(now - w.since);
  v.peer = cluster::node_name(job_, static_cast<std::uint32_t>(w.peer));
  if (w.peer >= 0 && static_cast<std::size_t>(w.peer) < lanes_.size()) v.link = lanes_[w.peer];
  const std::string over = v.link.empty() ? "" : " over " + v.link;
  const std::string where = "step " + std::to_string(w.step) + ", chunk " + std::to_string(w.chunk);
  const std::string check = ": check the daemon of " + v.peer +
                            " and the link between the two nodes (their logs, ringsync_link_* and "
                            "ringsync_peer_transports_info)";
  if (w.receive) {
    v.summary = here + " waits in its " + v.algorithm + ", " + where + ", for " + std::to_string(w.bytes) +
                " bytes from " + v.peer + over + moved + check;
  } else {
    v.summary = here + " waits in its " + v.algorithm + ", " + where + ", for its send of " +
                std::to_string(w.bytes) + " bytes to " + v.peer + over + " to complete" + moved + check;
  }
  return v;
}

std::vector<Executor::InFlight> Executor::in_flight(Clock::time_point now) const {
  std::vector<InFlight> out;
  for (const auto& [sequence, running] : active_) out.push_back(view(*running, now));
  return out;
}

std::optional<Status> Executor::overdue(Clock::time_point now, Clock::duration collective_timeout,
                                        Clock::duration progress_timeout) const {
  for (const auto& [sequence, running] : active_) {
    // A data task that failed waits for the ring's verdict, which comes
    // within twice --peer-timeout (formation::Membership::suspect) and names the cause;
    // so does one whose message just failed (a peer lost, its ring torn
    // down) while its task drains. A deadline's view of what is left would
    // mislead, so it waits as long, and no longer.
    if (running->failed) continue;
    if (running->watch) {
      const auto snapshot = running->watch->snapshot();
      if (snapshot.messages_failed > 0 && now - snapshot.first_failure < 2 * settings_.peer_timeout + std::chrono::seconds(1))
        continue;
    }
    const std::string what = describe(running->planned->op) + " of job '" + job_.id + "'";
    if (now - running->started >= collective_timeout) {
      return Status::Timeout(what + " did not finish in " + one_decimal(seconds(now - running->started)) +
                             " s (--collective-timeout): " + view(*running, now).summary);
    }
    if (progress_timeout <= Clock::duration::zero()) continue;
    if (running->phase == Phase::kDataPlane && running->watch) {
      const Clock::duration idle = now - running->watch->snapshot().last_progress;
      if (idle >= progress_timeout)
        return Status::Timeout(what + " moved no data for " + one_decimal(seconds(idle)) +
                               " s (--progress-timeout): " + view(*running, now).summary);
    } else if (now - running->phase_since >= progress_timeout) {
      return Status::Timeout(what + " did not end its " + phase_name(running->phase) + " in " +
                             one_decimal(seconds(now - running->phase_since)) +
                             " s (--progress-timeout): " + view(*running, now).summary);
    }
  }
  return std::nullopt;
}

std::size_t Executor::report_stalls(Clock::time_point now, Clock::duration after) {
  std::size_t stalled = 0;
  for (auto& [sequence, running] : active_) {
    if (now - running->started < after) continue;
    ++stalled;
    if (running->stall_told) continue;
    running->stall_told = true;
    metrics_.stall_reports.with({job_.id}).inc();
    RS_LOG(warn, "stall") << describe(running->planned->op) << " of job '" << job_.id << "' has run for "
                          << one_decimal(seconds(now - running->started)) << " s: " << view(*running, now).summary;
  }
  return stalled;
}

}  // namespace ringsync::service::execution
