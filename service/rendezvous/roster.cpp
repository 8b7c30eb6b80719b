#include "service/rendezvous/roster.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

namespace ringsync::service::rendezvous {

using nlohmann::json;

std::string roster_json(const Roster& roster) {
  json nodes = json::array();
  for (const auto& n : roster.nodes) nodes.push_back({{"address", n.address}, {"revision", n.revision}});
  json out{{"epoch", roster.epoch}, {"nodes", nodes}};
  if (!roster.left.empty()) out["left"] = roster.left;
  if (!roster.joined.empty()) out["joined"] = roster.joined;
  return out.dump();
}

Result<Roster> parse_roster(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (!j.is_object() || !j.contains("epoch") || !j.contains("nodes") || !j["nodes"].is_array() ||
      !j["epoch"].is_number_unsigned())
    return Status::InvalidArgument("not a ringsync roster: " + text.substr(0, 200));
  Roster r;
  r.epoch = j["epoch"].get<std::uint64_t>();
  for (const auto& n : j["nodes"]) {
    if (!n.is_object() || !n.contains("address") || !n["address"].is_string())
      return Status::InvalidArgument("a roster node without an address: " + text.substr(0, 200));
    r.nodes.push_back({n["address"].get<std::string>(), n.value("revision", std::int64_t{0})});
  }
  for (const char* field : {"left", "joined"}) {
    if (!j.contains(field)) continue;
    auto& into = std::string_view(field) == "left" ? r.left : r.joined;
    for (const auto& a : j[field]) {
      if (!a.is_string()) return Status::InvalidArgument(std::string("a roster's '") + field + "' is not a list of addresses: " + text.substr(0, 200));
      into.push_back(a.get<std::string>());
    }
  }
  return r;
}

bool is_newcomer(const Roster& current, const Registration& r, const std::vector<RosterNode>& lost) {
  const auto same = [&](const RosterNode& n) { return n.address == r.address; };
  const auto marked = [&](const RosterNode& n) { return n.address == r.address && n.revision == r.revision; };
  return std::none_of(current.nodes.begin(), current.nodes.end(), same) &&
         std::none_of(lost.begin(), lost.end(), marked);
}

NextRoster next_roster(const Roster& current, std::vector<Registration> registered, const RosterShape& shape,
                       const std::vector<RosterNode>& lost) {
  std::sort(registered.begin(), registered.end(), [](const Registration& a, const Registration& b) {
    return a.revision != b.revision ? a.revision < b.revision : a.address < b.address;
  });
  NextRoster out;
  out.roster.epoch = current.epoch + 1;
  out.roster.store_revision = current.store_revision;
  if (current.epoch == 0) {
    if (registered.size() < shape.first_nodes) {
      out.why = std::to_string(registered.size()) + " of the first " + std::to_string(shape.first_nodes) +
                " node(s) registered";
      return out;
    }
    for (std::size_t i = 0; i < shape.first_nodes; ++i)
      out.roster.nodes.push_back({registered[i].address, registered[i].revision});
    out.kind = NextRoster::Kind::kReady;
    return out;
  }
  std::map<std::string, const Registration*> by_address;
  for (const auto& r : registered) by_address[r.address] = &r;
  std::vector<std::optional<RosterNode>> places;
  std::string stale;
  for (const auto& node : current.nodes) {
    auto it = by_address.find(node.address);
    if (it == by_address.end()) {
      places.emplace_back();  // gone: a hole
    } else if (it->second->revision != node.revision) {
      places.push_back(RosterNode{node.address, it->second->revision});  // came back
    } else if (std::any_of(lost.begin(), lost.end(), [&](const RosterNode& l) {
                 return l.address == node.address && l.revision == node.revision;
               })) {
      places.emplace_back();  // seen lost by a node of its run: gone, whatever its lease says
    } else {
      stale += (stale.empty() ? "" : ", ") + node.address;
      places.emplace_back();
    }
  }
  if (!stale.empty()) {
    out.why = "node(s) " + stale + " of run " + std::to_string(current.epoch) +
              " have neither registered again nor gone yet";
    return out;
  }
  std::vector<RosterNode> newcomers;
  for (const auto& r : registered)
    if (is_newcomer(current, r, lost)) newcomers.push_back({r.address, r.revision});
  std::size_t next_newcomer = 0;
  for (auto& place : places)
    if (!place && next_newcomer < newcomers.size()) place = newcomers[next_newcomer++];
  for (auto& place : places)
    if (place) out.roster.nodes.push_back(*place);
  while (out.roster.nodes.size() < shape.max_nodes && next_newcomer < newcomers.size())
    out.roster.nodes.push_back(newcomers[next_newcomer++]);
  if (out.roster.nodes.size() < shape.min_nodes) {
    out.kind = NextRoster::Kind::kBelowMin;
    out.why = std::to_string(out.roster.nodes.size()) + " node(s) are there, fewer than the job's minimum of " +
              std::to_string(shape.min_nodes) + " (run " + std::to_string(current.epoch) + " had " +
              std::to_string(current.nodes.size()) + ")";
    return out;
  }
  const auto in = [](const std::vector<RosterNode>& nodes, const std::string& address) {
    return std::any_of(nodes.begin(), nodes.end(), [&](const RosterNode& n) { return n.address == address; });
  };
  for (const auto& n : current.nodes)
    if (!in(out.roster.nodes, n.address)) out.roster.left.push_back(n.address);
  for (const auto& n : out.roster.nodes)
    if (!in(current.nodes, n.address)) out.roster.joined.push_back(n.address);
  out.kind = NextRoster::Kind::kReady;
  return out;
}

}  // namespace ringsync::service::rendezvous
