// The stall report on node 0 (Horovod's stall inspector, across nodes).
#include <map>

#include "common/log.h"
#include "service/cluster/negotiator.h"

namespace ringsync::service::cluster {

std::size_t Negotiator::report_stalls(Clock::time_point now, Clock::duration stall_after) {
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
    auto direct = direct_ready.find(stall.name);
    if (direct != direct_ready.end() && direct->second != stall.ready_nodes) {
      // Waiting in both: small on some nodes, larger (or not an allreduce) on
      // others. Said once, also when a plain stall of it was said before (the
      // other side's report came later).
      stall_reported_.insert(stall.name);
      if (!disagreement_reported_.insert(stall.name).second) continue;
      metrics_.stall_reports.with({job_.id}).inc();
      RS_LOG(warn, "stall") << "tensor '" << stall.name << "' of job '" << job_.id
                            << "' is a small allreduce exchanged directly on node(s) " << rank_list(direct->second)
                            << " but is negotiated as a larger tensor or another collective on node(s) "
                            << rank_list(stall.ready_nodes)
                            << ": the nodes disagree on it, and it fails at --collective-timeout";
      continue;
    }
    if (!stall_reported_.insert(stall.name).second) continue;
    std::string ranks;
    for (std::uint32_t node : stall.missing_nodes) {
      if (!ranks.empty()) ranks += ",";
      ranks += std::to_string(node * job_.slots) + "-" + std::to_string(node * job_.slots + job_.slots - 1);
    }
    metrics_.stall_reports.with({job_.id}).inc();
    RS_LOG(warn, "stall") << "tensor '" << stall.name << "' of job '" << job_.id
                          << "' is ready on node(s) " << rank_list(stall.ready_nodes)
                          << " and still missing on node(s) " << rank_list(stall.missing_nodes)
                          << " (global ranks " << ranks << ") after "
                          << std::chrono::duration<double>(stall.waited).count() << " s";
  }
  for (auto* reported : {&stall_reported_, &disagreement_reported_})
    for (auto it = reported->begin(); it != reported->end();)
      it = still.count(*it) ? std::next(it) : reported->erase(it);
  return stalls.size();
}

}  // namespace ringsync::service::cluster
