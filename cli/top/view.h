// What `ringsync top` shows, worked out from two scrapes of every daemon: rates
// and deltas over the interval between them (the first frame, with one scrape,
// has the gauges only). Metrics a daemon does not serve (an older daemon, no
// such job) leave their cells empty; nothing here needs every series to exist.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/top/scrape.h"
#include "cli/top/waiting.h"

namespace ringsync::cli::top {

struct JobRow {
  std::string job_id;
  std::optional<double> ring_nodes, epoch;
  std::optional<double> collectives_per_second;       // status="ok"
  std::optional<double> bus_bandwidth;                // bytes/s, ringsync_bus_bytes_total over duration sum
  std::optional<double> stall_reports;                // new in the interval
};

struct NodeRow {
  std::string instance;
  std::string error;  // empty when it answered; else why it is DOWN
  std::optional<double> clients, stalled_tensors;
  std::string version;
  std::vector<JobRow> jobs;
  bool up() const { return error.empty(); }
};

struct LinkRow {
  std::string instance, job_id, peer, peer_address, direction, transports;
  std::optional<double> bytes_per_second;  // both planes
  // tx only: data-plane bytes sent / seconds a send was in flight (what the link
  // achieves while it works; the ring paces every link to the slowest).
  std::optional<double> busy_bandwidth;
  bool slowest = false;
};

struct RankRow {
  std::string instance, job_id, rank;  // rank: the local rank on that node
  std::optional<double> collectives;   // observations in the interval
  std::optional<double> mean_wait, p90_wait;  // seconds after the node's first rank
  std::optional<double> last;          // collectives in which it submitted last
  bool latest = false;
};

struct ErrorRow {
  std::string instance, kind;
  double count = 0;  // new in the interval
};

struct View {
  double interval_seconds = 0;  // 0: one scrape only, no rates yet
  std::vector<NodeRow> nodes;
  std::vector<LinkRow> links;
  std::vector<RankRow> ranks;
  std::vector<ErrorRow> errors;
  Waiting waiting;  // from the latest scrape's in-flight views
  int nodes_up() const;
};

// `previous` (empty on the first frame) and `current` are scrapes of the same
// targets in the same order. `job_id`: only that job's series ("" for all).
View make_view(const std::vector<Scrape>& previous, const std::vector<Scrape>& current, const std::string& job_id);

// The q-quantile (0..1) of observations given as cumulative bucket counts by
// upper bound (ascending, the last +Inf), interpolated within the bucket as
// Prometheus' histogram_quantile does; nullopt when there are none.
std::optional<double> bucket_quantile(double q, const std::vector<std::pair<double, double>>& cumulative);

}  // namespace ringsync::cli::top
