#include "cli/top/view.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <utility>

namespace ringsync::cli::top {
namespace {

using metrics::Sample;
using Samples = std::vector<Sample>;
using Key = std::vector<std::string>;  // the values of the grouping labels, in order
using Groups = std::map<Key, double>;
using Match = std::vector<std::pair<std::string, std::string>>;

// sum by (by...) (name{match...}), over the series of `job_id` (all when "") and
// those without a job_id label.
Groups sum_by(const Samples& samples, std::string_view name, const std::vector<std::string>& by,
              const std::string& job_id, const Match& match = {}) {
  Groups groups;
  for (const Sample& s : samples) {
    if (s.name != name) continue;
    if (!job_id.empty() && !s.label("job_id").empty() && s.label("job_id") != job_id) continue;
    bool ok = true;
    for (const auto& [label, value] : match) ok = ok && s.label(label) == value;
    if (!ok) continue;
    Key key;
    for (const auto& label : by) key.emplace_back(s.label(label));
    groups[key] += s.value;
  }
  return groups;
}

// Each group's increase from `before` to `now`. A counter that went down
// restarted (the daemon did): its increase is its new value, as in PromQL.
Groups increase(const Groups& before, const Groups& now) {
  Groups out;
  for (const auto& [key, value] : now) {
    const auto it = before.find(key);
    const double start = it == before.end() ? 0 : it->second;
    out[key] = value >= start ? value - start : value;
  }
  return out;
}

std::optional<double> find(const Groups& groups, const Key& key) {
  const auto it = groups.find(key);
  if (it == groups.end()) return std::nullopt;
  return it->second;
}

std::optional<double> ratio(std::optional<double> num, std::optional<double> den) {
  if (!num || !den || *den <= 0) return std::nullopt;
  return *num / *den;
}

// Numbers in numeric order ("2" < "10"), the rest as text.
bool natural_less(const std::string& a, const std::string& b) {
  long x = 0, y = 0;
  const auto [ea, ca] = std::from_chars(a.data(), a.data() + a.size(), x);
  const auto [eb, cb] = std::from_chars(b.data(), b.data() + b.size(), y);
  if (ca == std::errc() && cb == std::errc() && ea == a.data() + a.size() && eb == b.data() + b.size())
    return x != y ? x < y : a < b;
  return a < b;
}

// One daemon's two scrapes.
struct Interval {
  const Samples* before = nullptr;  // null: no earlier scrape (no rates)
  const Samples& now;
  double seconds = 0;
  const std::string& job_id;

  Groups sum(std::string_view name, const std::vector<std::string>& by, const Match& match = {}) const {
    return sum_by(now, name, by, job_id, match);
  }
  // The increase over the interval; empty when there is no earlier scrape.
  Groups delta(std::string_view name, const std::vector<std::string>& by, const Match& match = {}) const {
    if (!before) return {};
    return increase(sum_by(*before, name, by, job_id, match), sum(name, by, match));
  }
  std::optional<double> rate(const Groups& deltas, const Key& key) const {
    if (!before || seconds <= 0) return std::nullopt;
    const auto d = find(deltas, key);
    return d ? std::optional<double>(*d / seconds) : std::nullopt;
  }
};

std::optional<double> single(const Interval& in, std::string_view name) {
  return find(in.sum(name, {}), Key{});
}

NodeRow node_row(const std::string& instance, const Interval& in) {
  NodeRow node;
  node.instance = instance;
  node.clients = single(in, "ringsync_clients");
  node.stalled_tensors = single(in, "ringsync_stalled_tensors");
  for (const auto& [key, value] : in.sum("ringsync_build_info", {"version"})) node.version = key[0];

  const Groups nodes = in.sum("ringsync_ring_nodes", {"job_id"});
  const Groups epochs = in.sum("ringsync_ring_epoch", {"job_id"});
  const Groups collectives = in.delta("ringsync_collectives_total", {"job_id"}, {{"status", "ok"}});
  const Groups bus_bytes = in.delta("ringsync_bus_bytes_total", {"job_id"});
  const Groups busy_seconds = in.delta("ringsync_collective_duration_seconds_sum", {"job_id"});
  const Groups stalls = in.delta("ringsync_stall_reports_total", {"job_id"});
  std::map<std::string, bool> jobs;
  for (const Groups* g : {&nodes, &epochs}) {
    for (const auto& [key, value] : *g) jobs[key[0]] = true;
  }
  for (const auto& [job, unused] : jobs) {
    const Key key{job};
    JobRow row;
    row.job_id = job;
    row.ring_nodes = find(nodes, key);
    row.epoch = find(epochs, key);
    row.collectives_per_second = in.rate(collectives, key);
    if (in.before && !find(collectives, key)) row.collectives_per_second = 0;
    row.bus_bandwidth = ratio(find(bus_bytes, key), find(busy_seconds, key));
    row.stall_reports = find(stalls, key);
    node.jobs.push_back(std::move(row));
  }
  return node;
}

void add_links(const std::string& instance, const Interval& in, std::vector<LinkRow>& links) {
  const std::vector<std::string> link = {"job_id", "peer", "peer_address", "direction"};
  const std::vector<std::string> peer = {"job_id", "peer", "peer_address"};
  const Groups bytes = in.sum("ringsync_link_bytes_total", link);
  const Groups moved = in.delta("ringsync_link_bytes_total", link);
  const Groups sent_data = in.delta("ringsync_link_bytes_total", peer, {{"plane", "data"}, {"direction", "tx"}});
  const Groups busy = in.delta("ringsync_link_send_busy_seconds_total", peer);
  std::map<Key, std::string> transports;
  for (const auto& [key, value] : in.sum("ringsync_peer_transports_info", {"job_id", "peer", "transports"}))
    transports[{key[0], key[1]}] = key[2];
  std::vector<LinkRow> rows;
  for (const auto& [key, value] : bytes) {
    LinkRow row;
    row.instance = instance;
    row.job_id = key[0];
    row.peer = key[1];
    row.peer_address = key[2];
    row.direction = key[3];
    if (auto it = transports.find({key[0], key[1]}); it != transports.end()) row.transports = it->second;
    row.bytes_per_second = in.rate(moved, key);
    if (row.direction == "tx") row.busy_bandwidth = ratio(find(sent_data, {key[0], key[1], key[2]}),
                                                          find(busy, {key[0], key[1], key[2]}));
    rows.push_back(std::move(row));
  }
  // By job, peer, tx before rx; after the nodes before it.
  std::sort(rows.begin(), rows.end(), [](const LinkRow& a, const LinkRow& b) {
    if (a.job_id != b.job_id) return a.job_id < b.job_id;
    if (a.peer != b.peer) return natural_less(a.peer, b.peer);
    if (a.peer_address != b.peer_address) return a.peer_address < b.peer_address;
    return a.direction > b.direction;
  });
  links.insert(links.end(), rows.begin(), rows.end());
}

void add_ranks(const std::string& instance, const Interval& in, std::vector<RankRow>& ranks) {
  const std::vector<std::string> rank = {"job_id", "rank"};
  const Groups totals = in.sum("ringsync_rank_wait_seconds_count", rank);
  const Groups counts = in.delta("ringsync_rank_wait_seconds_count", rank);
  const Groups sums = in.delta("ringsync_rank_wait_seconds_sum", rank);
  const Groups buckets = in.delta("ringsync_rank_wait_seconds_bucket", {"job_id", "rank", "le"});
  const Groups last = in.delta("ringsync_rank_last_total", rank);
  std::vector<RankRow> rows;
  for (const auto& [key, total] : totals) {
    RankRow row;
    row.instance = instance;
    row.job_id = key[0];
    row.rank = key[1];
    row.collectives = find(counts, key);
    row.mean_wait = ratio(find(sums, key), row.collectives);
    std::vector<std::pair<double, double>> cumulative;
    for (auto it = buckets.lower_bound({key[0], key[1]}); it != buckets.end() && it->first[0] == key[0] &&
                                                         it->first[1] == key[1];
         ++it) {
      double le = 0;
      const std::string& text = it->first[2];
      if (text == "+Inf")
        le = std::numeric_limits<double>::infinity();
      else if (auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), le); ec != std::errc())
        continue;
      cumulative.emplace_back(le, it->second);
    }
    std::sort(cumulative.begin(), cumulative.end());
    if (row.collectives && *row.collectives > 0) row.p90_wait = bucket_quantile(0.9, cumulative);
    row.last = find(last, key);
    rows.push_back(std::move(row));
  }
  std::sort(rows.begin(), rows.end(), [](const RankRow& a, const RankRow& b) {
    return a.job_id != b.job_id ? a.job_id < b.job_id : natural_less(a.rank, b.rank);
  });
  ranks.insert(ranks.end(), rows.begin(), rows.end());
}

// Per job, the tx link that achieves the least while it works (by send-busy
// bandwidth; by bytes/s where no daemon serves the busy seconds).
void mark_slowest(std::vector<LinkRow>& links) {
  std::map<std::string, std::vector<LinkRow*>> by_job;
  for (auto& l : links)
    if (l.direction == "tx") by_job[l.job_id].push_back(&l);
  for (auto& [job, rows] : by_job) {
    for (auto value : {&LinkRow::busy_bandwidth, &LinkRow::bytes_per_second}) {
      LinkRow* slowest = nullptr;
      int candidates = 0;
      for (LinkRow* l : rows) {
        const auto& v = l->*value;
        if (!v || *v <= 0) continue;
        ++candidates;
        if (!slowest || *v < *(slowest->*value)) slowest = l;
      }
      if (candidates >= 2) slowest->slowest = true;
      if (candidates > 0) break;  // busy bandwidth decides wherever there is any
    }
  }
}

// Per node and job, the rank that submitted last most often (by mean wait where
// no daemon serves ringsync_rank_last_total).
void mark_latest(std::vector<RankRow>& ranks) {
  std::map<std::pair<std::string, std::string>, std::vector<RankRow*>> groups;
  for (auto& r : ranks) groups[{r.instance, r.job_id}].push_back(&r);
  for (auto& [where, rows] : groups) {
    if (rows.size() < 2) continue;
    for (auto value : {&RankRow::last, &RankRow::mean_wait}) {
      RankRow* latest = nullptr;
      for (RankRow* r : rows) {
        const auto& v = r->*value;
        if (v && *v > 0 && (!latest || *v > *(latest->*value))) latest = r;
      }
      if (latest) {
        latest->latest = true;
        break;
      }
    }
  }
}

}  // namespace

int View::nodes_up() const {
  return static_cast<int>(std::count_if(nodes.begin(), nodes.end(), [](const NodeRow& n) { return n.up(); }));
}

std::optional<double> bucket_quantile(double q, const std::vector<std::pair<double, double>>& cumulative) {
  if (cumulative.size() < 2 || !std::isinf(cumulative.back().first)) return std::nullopt;
  const double total = cumulative.back().second;
  if (!(total > 0)) return std::nullopt;
  const double rank = q * total;
  std::size_t b = 0;
  while (b < cumulative.size() && cumulative[b].second < rank) ++b;
  if (b >= cumulative.size() - 1) return cumulative[cumulative.size() - 2].first;  // in +Inf: the top bound
  const double lower = b == 0 ? 0 : cumulative[b - 1].first;
  const double below = b == 0 ? 0 : cumulative[b - 1].second;
  const double upper = cumulative[b].first;
  const double in_bucket = cumulative[b].second - below;
  if (b == 0 && upper <= 0) return upper;
  if (in_bucket <= 0) return upper;
  return lower + (upper - lower) * (rank - below) / in_bucket;
}

View make_view(const std::vector<Scrape>& previous, const std::vector<Scrape>& current, const std::string& job_id) {
  View view;
  for (std::size_t i = 0; i < current.size(); ++i) {
    const Scrape& now = current[i];
    if (!now.samples.ok()) {
      NodeRow down;
      down.instance = now.instance;
      down.error = now.samples.status().message();
      view.nodes.push_back(std::move(down));
      continue;
    }
    Interval in{nullptr, *now.samples, 0, job_id};
    if (i < previous.size() && previous[i].samples.ok() && previous[i].at < now.at) {
      in.before = &*previous[i].samples;
      in.seconds = std::chrono::duration<double>(now.at - previous[i].at).count();
      if (view.interval_seconds == 0) view.interval_seconds = in.seconds;
    }
    view.nodes.push_back(node_row(now.instance, in));
    add_links(now.instance, in, view.links);
    add_ranks(now.instance, in, view.ranks);
    for (const auto& [key, count] : in.delta("ringsync_errors_total", {"kind"}))
      if (count > 0) view.errors.push_back({now.instance, key[0], count});
  }
  mark_slowest(view.links);
  mark_latest(view.ranks);
  view.waiting = waiting_of(current, job_id);
  return view;
}

}  // namespace ringsync::cli::top
