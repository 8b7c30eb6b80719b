#include "service/negotiation/coordinator.h"

#include <algorithm>

#include "service/local/pending_collective.h"
#include "service/negotiation/combine.h"
#include "service/route/route.h"

namespace ringsync::service::negotiation {

namespace {

template <typename ValueOf>
void compare(const std::vector<std::optional<peer_wire::ReadyTensor>>& by_node, const char* field,
             ValueOf value_of, std::vector<std::string>& problems) {
  std::map<std::string, std::vector<std::uint32_t>> nodes_by_value;
  for (std::uint32_t n = 0; n < by_node.size(); ++n)
    if (by_node[n]) nodes_by_value[value_of(*by_node[n])].push_back(n);
  if (nodes_by_value.size() < 2) return;
  std::string text = std::string(field) + ": ";
  bool first = true;
  for (const auto& [value, nodes] : nodes_by_value) {
    if (!first) text += ", ";
    first = false;
    text += (nodes.size() == 1 ? "node " : "nodes ") + local::rank_list(nodes) +
            (nodes.size() == 1 ? " says " : " say ") + value;
  }
  problems.push_back(std::move(text));
}

std::uint64_t bytes_of(const peer_wire::ReadyTensor& t) { return t.count * dtype_size(t.dtype); }

}  // namespace

std::string disagreement(const std::string& name,
                         const std::vector<std::optional<peer_wire::ReadyTensor>>& by_node) {
  std::vector<std::string> problems;
  compare(by_node, "collective", [](const auto& t) {
    return std::string(wire::collective_kind_name(t.kind));
  }, problems);
  if (problems.empty()) {
    compare(by_node, "dtype", [](const auto& t) { return std::string(dtype_name(t.dtype)); }, problems);
    compare(by_node, "count", [](const auto& t) { return std::to_string(t.count); }, problems);
    const auto first = std::find_if(by_node.begin(), by_node.end(), [](const auto& t) { return t.has_value(); });
    if (first != by_node.end() && wire::traits((*first)->kind).reduces)
      compare(by_node, "op", [](const auto& t) { return std::string(reduce_op_name(t.op)); }, problems);
    if (first != by_node.end() && wire::traits((*first)->kind).rooted)
      compare(by_node, "root", [](const auto& t) { return std::to_string(t.root); }, problems);
  }
  if (problems.empty()) return "";
  std::string message = "nodes disagree on tensor '" + name + "': ";
  for (std::size_t i = 0; i < problems.size(); ++i) message += (i ? "; " : "") + problems[i];
  return message;
}

Coordinator::Coordinator(std::uint32_t num_nodes, std::uint64_t fusion_threshold_bytes,
                         InlineOptions inline_options)
    : num_nodes_(num_nodes),
      fusion_threshold_(fusion_threshold_bytes),
      inline_(inline_options),
      inline_limit_(route::inline_limit(inline_options.max_bytes, num_nodes)) {}

void Coordinator::add_ready(std::uint32_t node, const std::vector<peer_wire::ReadyTensor>& tensors,
                            Clock::time_point now, std::vector<std::vector<std::uint8_t>> data) {
  if (node >= num_nodes_) return;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const peer_wire::ReadyTensor& t = tensors[i];
    auto [it, inserted] = table_.try_emplace(t.name);
    Entry& e = it->second;
    if (inserted) {
      e.arrival = next_arrival_++;
      e.first_seen = now;
      e.by_node.resize(num_nodes_);
    }
    if (e.by_node[node]) {
      e.duplicate = "node " + std::to_string(node) + " submitted tensor '" + t.name +
                    "' again before it ran";
      continue;
    }
    e.by_node[node] = t;
    if (i < data.size() && !data[i].empty() && inline_limit_ > 0) {
      e.data.resize(num_nodes_);
      e.data[node] = std::move(data[i]);
    }
    if (++e.reported == num_nodes_) ready_.emplace(e.arrival, t.name);
  }
}

peer_wire::Plan Coordinator::plan(std::uint64_t epoch, std::uint64_t cycle, std::size_t max_bytes) {
  peer_wire::Plan plan{epoch, cycle, {}, {}};
  std::optional<std::size_t> open;  // index of the allreduce still taking fused tensors
  std::uint64_t open_bytes = 0;
  bool open_inline = false;  // whether it carries its result
  std::size_t plan_bytes = 0;
  // Ready everywhere, in arrival order.
  while (!ready_.empty()) {
    const std::string name = ready_.begin()->second;
    Entry& e = table_.at(name);
    std::string problem = !e.duplicate.empty() ? e.duplicate : disagreement(name, e.by_node);
    const bool small = problem.empty() && inline_ready(e);
    const std::size_t cost = name.size() + problem.size() + 32 +  // encoded, roughly
                             (small ? static_cast<std::size_t>(bytes_of(*e.by_node.front())) : 0);
    if (plan_bytes > 0 && plan_bytes + cost > max_bytes) break;
    plan_bytes += cost;
    ready_.erase(ready_.begin());
    if (!problem.empty()) {
      plan.errors.push_back({name, std::move(problem)});
      table_.erase(name);
      continue;
    }
    const peer_wire::ReadyTensor& t = *e.by_node.front();
    const std::uint64_t bytes = bytes_of(t);
    const bool fusable = wire::traits(t.kind).fuses && fusion_threshold_ > 0;
    // Inline tensors fuse with inline tensors only, up to the inline limit.
    const std::uint64_t limit = small ? std::min(fusion_threshold_, inline_limit_) : fusion_threshold_;
    peer_wire::Operation* fused = open ? &plan.operations[*open] : nullptr;
    if (fusable && fused && fused->dtype == t.dtype && fused->op == t.op && open_inline == small &&
        open_bytes + bytes <= limit) {
      fused->names.push_back(name);
      fused->counts.push_back(t.count);
      open_bytes += bytes;
    } else {
      plan.operations.push_back({next_sequence_++, t.kind, t.dtype, t.op, t.root, {name}, {t.count}, {}});
      fused = &plan.operations.back();
      open = fusable ? std::optional<std::size_t>(plan.operations.size() - 1) : std::nullopt;
      open_bytes = bytes;
      open_inline = small;
    }
    if (small) append_result(e, *fused);
    table_.erase(name);
  }
  return plan;
}

bool Coordinator::inline_ready(const Entry& e) const {
  const peer_wire::ReadyTensor& t = *e.by_node.front();
  route::Query query;
  query.kind = t.kind;
  query.bytes = bytes_of(t);
  query.alone = false;
  query.nodes = num_nodes_;
  // A node whose data has another size is not trusted with the result: the
  // tensor runs the ring instead.
  query.every_node_sent_data =
      e.data.size() == num_nodes_ &&
      std::all_of(e.data.begin(), e.data.end(), [&](const auto& d) { return d.size() == query.bytes; });
  return route::choose(route::Stage::kPlanning, query, {inline_.max_bytes, {}}).path == route::Path::kInline;
}

void Coordinator::append_result(const Entry& e, peer_wire::Operation& op) const {
  const peer_wire::ReadyTensor& t = *e.by_node.front();
  const std::size_t bytes = static_cast<std::size_t>(bytes_of(t));
  const std::size_t at = op.result.size();
  op.result.resize(at + bytes);
  std::vector<const void*> srcs;
  for (const auto& d : e.data) srcs.push_back(d.data());
  combine(t, srcs, inline_.ranks, op.result.data() + at);
}

std::vector<std::uint32_t> Coordinator::waiting_nodes(const std::string& name) const {
  std::vector<std::uint32_t> nodes;
  auto it = table_.find(name);
  if (it == table_.end() || it->second.reported == num_nodes_) return nodes;
  for (std::uint32_t n = 0; n < num_nodes_; ++n)
    if (it->second.by_node[n]) nodes.push_back(n);
  return nodes;
}

std::vector<Coordinator::Stall> Coordinator::stalled(Clock::time_point now,
                                                     Clock::duration age) const {
  std::vector<Stall> out;
  for (const auto& [name, e] : table_) {
    if (e.reported == num_nodes_ || now - e.first_seen < age) continue;
    Stall s{name, {}, {}, now - e.first_seen};
    for (std::uint32_t n = 0; n < num_nodes_; ++n) (e.by_node[n] ? s.ready_nodes : s.missing_nodes).push_back(n);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace ringsync::service::negotiation
