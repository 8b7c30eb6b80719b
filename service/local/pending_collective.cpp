#include "service/local/pending_collective.h"

#include <map>

namespace ringsync::service::local {

std::vector<std::uint32_t> PendingCollective::missing_ranks() const {
  std::vector<std::uint32_t> missing;
  for (std::size_t r = 0; r < present.size(); ++r)
    if (!present[r]) missing.push_back(static_cast<std::uint32_t>(r));
  return missing;
}

std::vector<std::uint32_t> PendingCollective::present_ranks() const {
  std::vector<std::uint32_t> ranks;
  for (std::size_t r = 0; r < present.size(); ++r)
    if (present[r]) ranks.push_back(static_cast<std::uint32_t>(r));
  return ranks;
}

collective::LocalPlan plan_of(const PendingCollective& collective) {
  const wire::Collective& first = collective.submissions.front().request;
  collective::LocalPlan plan;
  plan.kind = first.kind;
  plan.dtype = first.dtype;
  plan.op = first.op;
  plan.count = first.count;
  plan.root = first.root;
  for (const auto& s : collective.submissions) plan.ranks.push_back(s.where);
  return plan;
}

std::string rank_list(const std::vector<std::uint32_t>& ranks) {
  std::string out;
  for (auto r : ranks) {
    if (!out.empty()) out += ",";
    out += std::to_string(r);
  }
  return out;
}

namespace {

// "dtype: local rank 0 says f32, local ranks 1,2 say f64" when values differ.
template <typename Field>
void compare_field(const PendingCollective& p, const char* field, Field value_of,
                   std::vector<std::string>& problems) {
  std::map<std::string, std::vector<std::uint32_t>> ranks_by_value;
  for (const auto& s : p.submissions) ranks_by_value[value_of(s.request)].push_back(s.local_rank);
  if (ranks_by_value.size() < 2) return;
  std::string text = std::string(field) + ": ";
  bool first = true;
  for (const auto& [value, ranks] : ranks_by_value) {
    if (!first) text += ", ";
    first = false;
    text += (ranks.size() == 1 ? "local rank " : "local ranks ") + rank_list(ranks) +
            (ranks.size() == 1 ? " says " : " say ") + value;
  }
  problems.push_back(std::move(text));
}

}  // namespace

Status check_agreement(const PendingCollective& p) {
  std::vector<std::string> problems;
  compare_field(p, "collective", [](const wire::Collective& c) {
    return std::string(wire::collective_kind_name(c.kind));
  }, problems);
  if (!problems.empty()) {
    // Different collectives under one name: the other fields mean nothing.
  } else {
    const wire::CollectiveKind kind = p.submissions.front().request.kind;
    // One kind of memory per collective: the node's data moves in one place.
    compare_field(p, "memory", [](const wire::Collective& c) {
      return std::string(wire::memory_name(c.memory));
    }, problems);
    if (wire::moves_data(kind)) {
      compare_field(p, "dtype", [](const wire::Collective& c) {
        return std::string(dtype_name(c.dtype));
      }, problems);
      compare_field(p, "count", [](const wire::Collective& c) {
        return std::to_string(c.count);
      }, problems);
    }
    if (wire::reduces(kind))
      compare_field(p, "op", [](const wire::Collective& c) {
        return std::string(reduce_op_name(c.op));
      }, problems);
    if (wire::traits(kind).rooted)
      compare_field(p, "root", [](const wire::Collective& c) {
        return std::to_string(c.root);
      }, problems);
  }
  if (problems.empty()) return Status::Ok();
  std::string message = "local ranks disagree on tensor '" + p.name + "': ";
  for (std::size_t i = 0; i < problems.size(); ++i) message += (i ? "; " : "") + problems[i];
  return Status::Mismatch(std::move(message));
}

}  // namespace ringsync::service::local
