// The periodic look at a formed ring: stuck operations, collectives the other
// nodes never readied, link bandwidth, and the stall report on node 0.
#include <map>

#include "common/log.h"
#include "service/cluster/cluster_node.h"

namespace ringsync::service::cluster {

std::size_t ClusterNode::sweep(Clock::time_point now, Clock::duration stall_after, Clock::duration timeout) {
  std::erase_if(retired_, [](const auto& engine) { return engine->outstanding() == 0; });
  // A ring operation that runs for longer than the collective timeout is stuck
  // (a data path that stalled while heartbeats still flow): start over.
  for (const auto& [sequence, started] : active_) {
    if (now - started < timeout) continue;
    lose(Status::Timeout("ring operation " + std::to_string(sequence) + " of job '" + config_.job_id +
                         "' made no progress for " +
                         std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now - started).count()) +
                         " s (--collective-timeout): the data path between the nodes is stuck"));
    break;
  }
  // A tensor ready here that the other nodes never readied in time: the job
  // cannot go on consistently (a late plan would run it for ranks already told
  // it failed, with buffers they may have reused), so the ring starts over and
  // every node's ranks get the reason.
  std::optional<Status> expired;
  for (const auto& [name, w] : waiting_) {
    if (w.ready_at.empty() || now - w.ready_at.front() < timeout) continue;
    expired = Status::Timeout(
        "tensor '" + name + "' of job '" + config_.job_id + "' timed out after " +
        std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now - w.ready_at.front()).count()) +
        " s on node " + std::to_string(config_.node_rank) +
        ": every local rank submitted it, but not every node did (--collective-timeout; node 0's log "
        "names the missing nodes)");
    break;
  }
  if (expired) {
    RS_LOG(warn, "collective") << expired->message();
    if (formed_) {
      lose(*expired);
    } else {
      fail_waiting(*expired, "timeout");
    }
  }
  // Link bandwidth over the last sweep period.
  if (link_counters_) {
    const double seconds = std::chrono::duration<double>(now - last_link_sample_).count();
    const std::size_t n = link_counters_->sent.size();
    for (std::size_t peer = 0; peer < n; ++peer) {
      if (peer == config_.node_rank) continue;
      const std::string label = std::to_string(peer);
      const std::uint64_t sent = link_counters_->sent[peer].load(std::memory_order_relaxed);
      const std::uint64_t received = link_counters_->received[peer].load(std::memory_order_relaxed);
      metrics_.link_bytes.with({label, "tx"}).inc(static_cast<double>(sent - last_link_bytes_[peer]));
      metrics_.link_bytes.with({label, "rx"}).inc(static_cast<double>(received - last_link_bytes_[n + peer]));
      if (seconds > 0) {
        metrics_.link_bandwidth.with({label, "tx"}).set(static_cast<double>(sent - last_link_bytes_[peer]) / seconds);
        metrics_.link_bandwidth.with({label, "rx"})
            .set(static_cast<double>(received - last_link_bytes_[n + peer]) / seconds);
      }
      last_link_bytes_[peer] = sent;
      last_link_bytes_[n + peer] = received;
    }
    last_link_sample_ = now;
  }
  if (!coordinator_) return 0;
  // Horovod's stall warning, across nodes: ready on some, missing on others.
  // Node 0 sees every direct exchange too (it forwards the contributions).
  auto stalls = coordinator_->stalled(now, stall_after);
  std::map<std::string, std::vector<std::uint32_t>> direct_ready;
  if (direct_)
    for (auto& stall : direct_->stalled(now, stall_after)) {
      direct_ready[stall.name] = stall.ready_nodes;
      stalls.push_back(std::move(stall));
    }
  std::set<std::string> still;
  for (const auto& stall : stalls) {
    still.insert(stall.name);
    if (!stall_reported_.insert(stall.name).second) continue;
    auto direct = direct_ready.find(stall.name);
    if (direct != direct_ready.end() && direct->second != stall.ready_nodes) {
      // Waiting in both: small on some nodes, larger (or not an allreduce) on others.
      RS_LOG(warn, "stall") << "tensor '" << stall.name << "' of job '" << config_.job_id
                            << "' is a small allreduce exchanged directly on node(s) " << rank_list(direct->second)
                            << " but is negotiated as a larger tensor or another collective on node(s) "
                            << rank_list(stall.ready_nodes)
                            << ": the nodes disagree on it, and it fails at --collective-timeout";
      continue;
    }
    std::string ranks;
    for (std::uint32_t node : stall.missing_nodes) {
      if (!ranks.empty()) ranks += ",";
      ranks += std::to_string(node * slots()) + "-" + std::to_string(node * slots() + slots() - 1);
    }
    RS_LOG(warn, "stall") << "tensor '" << stall.name << "' of job '" << config_.job_id
                          << "' is ready on node(s) " << rank_list(stall.ready_nodes)
                          << " and still missing on node(s) " << rank_list(stall.missing_nodes)
                          << " (global ranks " << ranks << ") after "
                          << std::chrono::duration<double>(stall.waited).count() << " s";
  }
  for (auto it = stall_reported_.begin(); it != stall_reported_.end();)
    it = still.count(*it) ? std::next(it) : stall_reported_.erase(it);
  return stalls.size();
}

}  // namespace ringsync::service::cluster
