// The daemon's metric families (DESIGN.md "Metrics"), registered once.
//
// Per-job series carry a `job_id` label (not `job`: Prometheus sets `job` on
// every scraped series to the scrape job's name, and would rename ours to
// `exported_job`). They are: collectives, collective bytes and duration, bus
// bandwidth, rank wait, ring nodes and epoch, link bytes and bandwidth, peers
// lost. A job's series go (forget_job) a while after the job has ended here,
// so their number stays bounded by the jobs served (--max-jobs) and those
// ended recently; docs/cluster.md ("Metrics") counts them.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/dtype.h"
#include "common/metrics.h"
#include "common/status.h"
#include "common/wire.h"
#include "service/observe/error_kind.h"

namespace ringsync::cuda {
class GpuSampler;
}

namespace ringsync::service::observe {

// A status as a label value: "ok", "mismatch", "peer_lost", ...
std::string status_label(StatusCode code);

struct DaemonMetrics {
  explicit DaemonMetrics(metrics::Registry& registry);
  ~DaemonMetrics();

  // Starts reading the GPU gauges (ringsync_gpu_*, cuda/nvml_sampler.h) from NVML every
  // `period` on a thread of their own. Without NVML or a GPU: one info line, no series.
  void start_gpu_sampling(std::chrono::milliseconds period = std::chrono::seconds(2));

  // A finished collective: its outcome, payload and timings.
  void collective_done(std::string_view job, wire::CollectiveKind kind, DType dtype, std::string_view status,
                       std::uint64_t bytes, double seconds, std::size_t ranks, bool device = false);
  // The link rate the operator says the nodes have (ringsyncd --link-rate), for
  // the alerts that compare against it. 0: not configured (no series).
  void set_link_rate(double bytes_per_second);
  // Deletes every series of the job (it ended here a while ago).
  void forget_job(std::string_view job);
  void error(ErrorKind kind) { errors.with({label(kind)}).inc(); }

  metrics::CounterFamily& collectives;        // job_id, op, status
  metrics::CounterFamily& collective_bytes;   // job_id, op, dtype
  metrics::HistogramFamily& duration;         // job_id, op
  metrics::GaugeFamily& bus_bandwidth;        // job_id, op
  metrics::CounterFamily& bus_bytes;          // job_id, op
  metrics::CounterFamily& device_collectives; // job_id, op
  metrics::HistogramFamily& rank_wait;        // job_id, rank
  metrics::CounterFamily& rank_last;          // job_id, rank
  metrics::CounterFamily& stall_reports;      // job_id
  metrics::GaugeFamily& stalled_tensors;
  metrics::GaugeFamily& clients;
  metrics::GaugeFamily& jobs;
  metrics::GaugeFamily& kept_state_bytes;
  metrics::GaugeFamily& registered_bytes;     // memory
  metrics::CounterFamily& staged_bytes;
  metrics::CounterFamily& errors;             // kind
  metrics::GaugeFamily& ring_nodes;           // job_id
  metrics::GaugeFamily& ring_epoch;           // job_id
  metrics::GaugeFamily& ring_recovery;        // job_id: seconds from a lost run to this node's place in the next
  // Multi-node (service/cluster/).
  metrics::CounterFamily& link_bytes;         // job_id, peer, peer_address, direction, plane
  metrics::GaugeFamily& link_bandwidth;       // job_id, peer, peer_address, direction
  metrics::CounterFamily& link_send_busy;     // job_id, peer, peer_address
  metrics::GaugeFamily& link_rate;
  metrics::CounterFamily& ring_operations;    // op
  metrics::CounterFamily& data_operations;    // algorithm
  metrics::CounterFamily& gathered_bytes;
  metrics::CounterFamily& fused_tensors;
  metrics::CounterFamily& inline_operations;
  metrics::HistogramFamily& negotiation;
  metrics::CounterFamily& cache_hits;
  metrics::CounterFamily& cache_misses;
  metrics::GaugeFamily& peer_transports;      // job_id, peer, peer_address, transports, avoided: info, always 1
  metrics::CounterFamily& peers_lost;         // job_id
  metrics::CounterFamily& missed_wakeups;     // job_id: data-plane wake-ups the transport lost
  metrics::CounterFamily& integrity_failures; // job_id: --verify-results found copies that differ
  metrics::GaugeFamily& build_info;           // version, kernel_isa
  metrics::GaugeFamily& gpu_devices;          // GPUs NVML reports; 0 without NVML

 private:
  metrics::Registry& registry_;
  std::unique_ptr<cuda::GpuSampler> gpu_sampler_;
};

}  // namespace ringsync::service::observe
