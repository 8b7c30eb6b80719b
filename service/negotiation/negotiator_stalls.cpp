// The stall report on node 0 (Horovod's stall inspector, across nodes).

#include <algorithm>
#include <map>
#include <set>

#include "common/log.h"
#include "service/negotiation/negotiator.h"

namespace ringsync::service::negotiation {

void Negotiator::check_paths(const std::string& name) {
  if (!coordinator_ || !direct_) return;
  auto direct = direct_->waiting_nodes(name);
  auto negotiated = coordinator_->waiting_nodes(name);
  if (direct.empty() && negotiated.empty()) return;
  // One side only: the other may have waited on a ring lost since (it timed
  // out before this side arrived); the disagreement is the same when the ring
  // had as many nodes and none of them is on both sides (a tensor that moved
  // path on every node, as after an elastic change, is no disagreement).
  std::string since;
  if (direct.empty() || negotiated.empty()) {
    auto it = lost_paths_.find(name);
    if (it == lost_paths_.end() || Clock::now() - it->second.at > kLostPathsLinger ||
        it->second.num_nodes != job_.num_nodes)
      return;
    const bool direct_lost = direct.empty();
    const std::vector<std::uint32_t>& here = direct_lost ? negotiated : direct;
    const std::vector<std::uint32_t>& there = direct_lost ? it->second.direct : it->second.negotiated;
    if (there.empty()) return;
    for (std::uint32_t node : there)
      if (std::find(here.begin(), here.end(), node) != here.end()) return;
    (direct_lost ? direct : negotiated) = there;
    since = std::string(" (the ") + (direct_lost ? "direct exchange" : "negotiation") + " side waited on a ring lost " +
            std::to_string(std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - it->second.at).count()) +
            " s ago)";
  }
  stall_reported_.insert(name);
  if (!disagreement_reported_.insert(name).second) return;
  metrics_.stall_reports.with({job_.id}).inc();
  RS_LOG(warn, "stall") << "tensor '" << name << "' of job '" << job_.id
                        << "' is a small allreduce exchanged directly on node(s) " << local::rank_list(direct)
                        << " but is negotiated as a larger tensor or another collective on node(s) "
                        << local::rank_list(negotiated) << since
                        << ": the nodes disagree on it, and it fails at --collective-timeout";
}

void Negotiator::remember_paths() {
  if (!coordinator_) return;
  const Clock::time_point now = Clock::now();
  for (auto it = lost_paths_.begin(); it != lost_paths_.end();)
    it = now - it->second.at > kLostPathsLinger ? lost_paths_.erase(it) : std::next(it);
  const auto keep = [&](const std::string& name) -> LostPaths& {
    LostPaths& paths = lost_paths_[name];
    if (paths.at != now) paths = LostPaths{{}, {}, now, job_.num_nodes};  // this loss only, not an earlier one's
    return paths;
  };
  for (const auto& stall : coordinator_->stalled(now, Clock::duration::zero()))
    if (lost_paths_.size() < kLostPathsKept || lost_paths_.count(stall.name)) keep(stall.name).negotiated = stall.ready_nodes;
  if (direct_)
    for (const auto& stall : direct_->stalled(now, Clock::duration::zero()))
      if (lost_paths_.size() < kLostPathsKept || lost_paths_.count(stall.name)) keep(stall.name).direct = stall.ready_nodes;
}

std::vector<Negotiator::WaitingTensor> Negotiator::waiting_view(Clock::time_point now) const {
  std::map<std::string, negotiation::Coordinator::Stall> known;
  if (coordinator_)
    for (auto& stall : coordinator_->stalled(now, Clock::duration::zero())) known[stall.name] = std::move(stall);
  std::set<std::string> direct;
  if (direct_)
    for (auto& stall : direct_->stalled(now, Clock::duration::zero())) {
      direct.insert(stall.name);
      known[stall.name] = std::move(stall);
    }
  std::vector<WaitingTensor> out;
  for (const auto& [name, waiting] : waiting_) {
    if (waiting.ready_at.empty()) continue;
    WaitingTensor t;
    t.name = name;
    t.ready_at = waiting.ready_at.front();
    if (direct.count(name) || (direct_ && !direct_->waiting_nodes(name).empty())) t.path = "direct exchange";
    if (auto it = known.find(name); it != known.end()) {
      t.ready_nodes = it->second.ready_nodes;
      t.missing_nodes = it->second.missing_nodes;
    }
    out.push_back(std::move(t));
  }
  return out;
}

std::size_t Negotiator::report_stalls(Clock::time_point now, Clock::duration stall_after) {
  if (!coordinator_) return 0;
  // Horovod's stall warning, across nodes: ready on some, missing on others.
  // Node 0 sees every direct exchange too (it forwards the contributions).
  // A tensor waiting on both paths was named when it arrived (check_paths).
  auto stalls = coordinator_->stalled(now, stall_after);
  if (direct_)
    for (auto& stall : direct_->stalled(now, stall_after)) stalls.push_back(std::move(stall));
  for (const auto& stall : stalls) {
    if (!stall_reported_.insert(stall.name).second) continue;
    std::string ranks;
    for (std::uint32_t node : stall.missing_nodes) {
      if (!ranks.empty()) ranks += ",";
      ranks += std::to_string(node * job_.slots) + "-" + std::to_string(node * job_.slots + job_.slots - 1);
    }
    metrics_.stall_reports.with({job_.id}).inc();
    RS_LOG(warn, "stall") << "tensor '" << stall.name << "' of job '" << job_.id
                          << "' is ready on node(s) " << local::rank_list(stall.ready_nodes)
                          << " and still missing on node(s) " << local::rank_list(stall.missing_nodes)
                          << " (global ranks " << ranks << ") after "
                          << std::chrono::duration<double>(stall.waited).count() << " s";
  }
  // Forget what was said of tensors no longer waiting anywhere.
  const auto waiting = [this](const std::string& name) {
    return !coordinator_->waiting_nodes(name).empty() || (direct_ && !direct_->waiting_nodes(name).empty());
  };
  for (auto* reported : {&stall_reported_, &disagreement_reported_})
    for (auto it = reported->begin(); it != reported->end();)
      it = waiting(*it) ? std::next(it) : reported->erase(it);
  return stalls.size();
}

}  // namespace ringsync::service::negotiation
