#include "cli/top/waiting.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

namespace ringsync::cli::top {
namespace {

using nlohmann::json;

std::string number(double v, const char* format) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string join(const json& list, const char* separator = ", ") {
  std::string out;
  for (const auto& item : list) {
    if (!out.empty()) out += separator;
    out += item.is_string() ? item.get<std::string>() : item.dump();
  }
  return out;
}

std::string what_of(const json& e) {
  const json tensors = e.value("tensors", json::array());
  std::string first = tensors.empty() ? "?" : tensors.front().get<std::string>();
  std::string text = "'" + first + "'";
  if (tensors.size() > 1) text += " +" + std::to_string(tensors.size() - 1);
  if (e.contains("sequence")) text = e.value("kind", std::string("op")) + " " + text + " (#" + e["sequence"].dump() + ")";
  return text;
}

std::string waits_for_of(const json& e) {
  const std::string phase = e.value("phase", std::string());
  if (!e.contains("waiting_for")) {
    if (phase == "planning") return "the plan (every node has it ready)";
    return "its own work (this node's CPU" + std::string(phase == "data plane" ? ", the gather, GPU copies)" : ")");
  }
  const json& w = e["waiting_for"];
  if (w.contains("local_ranks")) return "local rank(s) " + join(w["local_ranks"], ",") + " to submit it";
  std::string text = join(w.value("names", json::array()));
  if (const std::string link = w.value("link", std::string()); !link.empty()) text += " over " + link;
  if (w.contains("bytes")) {
    text += std::string(": ") + (w.value("direction", std::string()) == "send" ? "send " : "receive ") +
            w["bytes"].dump() + " B, step " + w["step"].dump() + ", chunk " + w["chunk"].dump() + ", for " +
            number(w.value("seconds", 0.0), "%.1f") + " s";
  } else {
    text += ": " + w.value("what", std::string());
  }
  return text;
}

}  // namespace

Waiting waiting_of(const std::vector<Scrape>& scrapes, const std::string& job_id) {
  Waiting out;
  // Per job: who is waited for, by how many entries on which daemons.
  std::map<std::string, std::map<std::string, std::pair<int, std::set<std::string>>>> waited;
  // Per job, the data-plane wait at the earliest step: in a ring where every
  // node waits for another, the node furthest behind waits for the one at fault.
  struct Earliest {
    long step = -1;
    std::string whom, waiter;
  };
  std::map<std::string, Earliest> earliest;
  for (const Scrape& scrape : scrapes) {
    if (!scrape.samples.ok()) continue;  // DOWN: the NODES section says why
    if (!scrape.in_flight.ok()) {
      out.unread.push_back(scrape.instance + ": " + scrape.in_flight.status().message());
      continue;
    }
    try {
      const json view = json::parse(*scrape.in_flight);
      for (const json& job : view.at("jobs")) {
        const std::string id = job.at("job_id").get<std::string>();
        if (!job_id.empty() && id != job_id) continue;
        const std::string node = job.contains("node_rank") ? job["node_rank"].dump() : "-";
        for (const json& e : job.at("waiting")) {
          WaitRow row{scrape.instance, id, node, e.value("phase", std::string("?")), what_of(e),
                      e.value("age_seconds", 0.0), waits_for_of(e)};
          out.rows.push_back(std::move(row));
          if (!e.contains("waiting_for")) continue;
          const json& w = e["waiting_for"];
          if (w.contains("local_ranks")) {
            auto& entry = waited[id]["local rank(s) " + join(w["local_ranks"], ",") + " on " + scrape.instance];
            ++entry.first;
            entry.second.insert(scrape.instance);
          }
          if (w.contains("step") && !w.value("names", json::array()).empty()) {
            const long step = w["step"].get<long>();
            Earliest& e0 = earliest[id];
            if (e0.step < 0 || step < e0.step)
              e0 = {step, w["names"].front().get<std::string>(), "node " + node + " at step " + std::to_string(step)};
          }
          for (const json& name : w.value("names", json::array())) {
            auto& entry = waited[id][name.get<std::string>()];
            ++entry.first;
            entry.second.insert(scrape.instance);
          }
        }
      }
    } catch (const std::exception& e) {
      out.unread.push_back(scrape.instance + ": its /debug/inflight is not the JSON expected (" + e.what() + ")");
    }
  }
  std::stable_sort(out.rows.begin(), out.rows.end(),
                   [](const WaitRow& a, const WaitRow& b) { return a.age_seconds > b.age_seconds; });
  for (const auto& [id, by_whom] : waited) {
    int most = 0;
    for (const auto& [whom, entry] : by_whom) most = std::max(most, entry.first);
    // Several as often (nodes waiting for each other): the earliest wait decides.
    const auto e0 = earliest.find(id);
    const bool decided = e0 != earliest.end() && by_whom.count(e0->second.whom) &&
                         by_whom.at(e0->second.whom).first == most &&
                         std::count_if(by_whom.begin(), by_whom.end(), [&](const auto& b) { return b.second.first == most; }) > 1;
    for (const auto& [whom, entry] : by_whom) {
      if (entry.first != most || (decided && whom != e0->second.whom)) continue;
      out.verdicts.push_back("job " + id + " waits on " + whom + ": " + std::to_string(entry.first) +
                             " entr" + (entry.first == 1 ? "y" : "ies") + " on " +
                             std::to_string(entry.second.size()) + " daemon(s) wait for it" +
                             (decided ? " (the earliest wait: " + e0->second.waiter + ")" : ""));
    }
  }
  return out;
}

}  // namespace ringsync::cli::top
