#include "service/negotiation/direct_exchange.h"

#include <algorithm>

#include "service/negotiation/combine.h"

namespace ringsync::service::negotiation {

DirectExchange::DirectExchange(std::uint32_t num_nodes, std::uint64_t ranks)
    : num_nodes_(num_nodes), ranks_(ranks) {}

std::optional<DirectExchange::Round> DirectExchange::add(std::uint32_t origin, peer_wire::DirectTensor contribution,
                                                         Clock::time_point now) {
  if (origin >= num_nodes_) return std::nullopt;
  const std::string name = contribution.tensor.name;
  auto [it, fresh] = table_.try_emplace(name);
  if (fresh) it->second.resize(num_nodes_);
  Queues& queues = it->second;
  queues[origin].push_back(Arrived{std::move(contribution), now});
  if (!std::all_of(queues.begin(), queues.end(), [](const auto& q) { return !q.empty(); })) return std::nullopt;
  Round round = finish(name, queues);
  for (auto& q : queues) q.pop_front();
  if (std::all_of(queues.begin(), queues.end(), [](const auto& q) { return q.empty(); })) table_.erase(it);
  return round;
}

DirectExchange::Round DirectExchange::finish(const std::string& name, Queues& queues) const {
  Round round;
  round.name = name;
  round.tensor = queues.front().front().contribution.tensor;
  std::vector<std::optional<peer_wire::ReadyTensor>> by_node;
  for (const auto& q : queues) by_node.push_back(q.front().contribution.tensor);
  round.error = disagreement(name, by_node);
  if (!round.error.empty()) {
    round.outcome = Round::Outcome::kMismatch;
    return round;
  }
  const std::size_t bytes = static_cast<std::size_t>(round.tensor.count * dtype_size(round.tensor.dtype));
  std::vector<const void*> node_data;
  for (const auto& q : queues) {
    const auto& data = q.front().contribution.data;
    if (data.size() != bytes) {
      round.outcome = Round::Outcome::kNegotiate;
      return round;
    }
    node_data.push_back(data.data());
  }
  round.result.resize(bytes);
  combine(round.tensor, node_data, ranks_, round.result.data());
  return round;
}

std::vector<std::uint32_t> DirectExchange::waiting_nodes(const std::string& name) const {
  std::vector<std::uint32_t> nodes;
  auto it = table_.find(name);
  if (it == table_.end()) return nodes;
  for (std::uint32_t n = 0; n < num_nodes_; ++n)
    if (!it->second[n].empty()) nodes.push_back(n);
  return nodes;
}

std::vector<Coordinator::Stall> DirectExchange::stalled(Clock::time_point now, Clock::duration age) const {
  std::vector<Coordinator::Stall> out;
  for (const auto& [name, queues] : table_) {
    Clock::time_point first = now;
    for (const auto& q : queues)
      if (!q.empty()) first = std::min(first, q.front().at);
    if (now - first < age) continue;
    Coordinator::Stall s{name, {}, {}, now - first};
    for (std::uint32_t n = 0; n < num_nodes_; ++n) (queues[n].empty() ? s.missing_nodes : s.ready_nodes).push_back(n);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace ringsync::service::negotiation
