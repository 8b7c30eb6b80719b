// The daemon's in-flight view (GET /debug/inflight): for every job, each
// collective still waiting here and what for — local ranks that have not
// submitted it, the other nodes (planning), or a peer and link (the data
// plane) — with its phase and age. Read on demand; nothing is kept for it.
#include <unistd.h>

#include <chrono>

#include <nlohmann/json.hpp>

#include "service/daemon.h"

namespace ringsync::service {

namespace {

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

nlohmann::json node_list(const std::vector<std::uint32_t>& nodes) {
  nlohmann::json list = nlohmann::json::array();
  for (auto n : nodes) list.push_back(n);
  return list;
}

// {"nodes": [...], "names": [...], "what": ...}: the other nodes an entry waits for.
nlohmann::json waiting_for_nodes(const cluster::JobSpec& job, const std::vector<std::uint32_t>& nodes,
                                 const char* what) {
  nlohmann::json names = nlohmann::json::array();
  for (auto n : nodes) names.push_back(cluster::node_name(job, n));
  return {{"nodes", node_list(nodes)}, {"names", names}, {"what", what}};
}

nlohmann::json operation(const execution::Executor::InFlight& op) {
  nlohmann::json o = {{"phase", op.phase},
                      {"sequence", op.sequence},
                      {"kind", op.kind},
                      {"tensors", op.names},
                      {"bytes", op.bytes},
                      {"age_seconds", op.age_seconds},
                      {"phase_seconds", op.phase_seconds},
                      {"summary", op.summary}};
  if (!op.algorithm.empty()) {
    o["algorithm"] = op.algorithm;
    o["bytes_moved"] = op.bytes_moved;
    o["idle_seconds"] = op.idle_seconds;
  }
  if (op.waiting) {
    o["waiting_for"] = {{"nodes", {op.waiting->peer}},
                        {"names", {op.peer}},
                        {"what", op.waiting->receive ? "its data" : "its send to complete"},
                        {"link", op.link},
                        {"direction", op.waiting->receive ? "receive" : "send"},
                        {"bytes", op.waiting->bytes},
                        {"step", op.waiting->step},
                        {"chunk", op.waiting->chunk},
                        {"seconds", op.waiting_seconds}};
  }
  return o;
}

}  // namespace

std::string Daemon::in_flight_json() {
  const Clock::time_point now = Clock::now();
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  nlohmann::json jobs = nlohmann::json::array();
  const auto job_entry = [&](const std::string& id) -> nlohmann::json& {
    for (auto& j : jobs)
      if (j["job_id"] == id) return j;
    jobs.push_back({{"job_id", id}, {"waiting", nlohmann::json::array()}});
    return jobs.back();
  };
  for (auto& [id, job] : jobs_) {
    for (auto& [name, pending] : job.pending()) {
      job_entry(id)["waiting"].push_back(
          {{"phase", "local ranks"},
           {"tensors", {name}},
           {"age_seconds", seconds(now - pending.first_submit)},
           {"submitted_local_ranks", pending.present_ranks()},
           {"waiting_for", {{"local_ranks", pending.missing_ranks()}, {"what", "these local ranks to submit it"}}}});
    }
  }
  for (auto& [id, hosted] : rings_) {
    const cluster::JobRing& ring = *hosted.ring;
    nlohmann::json& entry = job_entry(id);
    entry["node_rank"] = ring.node_rank();
    entry["num_nodes"] = ring.num_nodes();
    entry["ring"] = ring.formed() ? "formed" : "forming";
    entry["epoch"] = ring.epoch();
    const auto in_flight = ring.in_flight(now);
    for (const auto& t : in_flight.planning) {
      nlohmann::json w = {{"phase", "planning"},
                          {"path", t.path},
                          {"tensors", {t.name}},
                          {"age_seconds", seconds(now - t.ready_at)}};
      if (!t.missing_nodes.empty() || !t.ready_nodes.empty()) {
        w["ready_nodes"] = node_list(t.ready_nodes);
        w["waiting_for"] = waiting_for_nodes(ring.job(), t.missing_nodes, "their local ranks to submit it");
      } else if (ring.node_rank() != 0 && std::string_view(t.path) == "negotiation") {
        w["waiting_for"] = waiting_for_nodes(ring.job(), {0}, "the plan");
      }
      entry["waiting"].push_back(std::move(w));
    }
    for (const auto& op : in_flight.operations) entry["waiting"].push_back(operation(op));
  }
  const nlohmann::json view = {
      {"hostname", host},
      {"pid", ::getpid()},
      {"time_unix_seconds",
       std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count()},
      {"jobs", jobs}};
  return view.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace ringsync::service
