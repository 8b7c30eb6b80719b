// The daemon's metric families (DESIGN.md "Metrics"), registered once.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "common/dtype.h"
#include "common/metrics.h"
#include "common/status.h"
#include "common/wire.h"

namespace ringsync::cuda {
class GpuSampler;
}

namespace ringsync::service {

// A status as a label value: "ok", "mismatch", "peer_lost", ...
std::string status_label(StatusCode code);

struct DaemonMetrics {
  explicit DaemonMetrics(metrics::Registry& registry);
  ~DaemonMetrics();

  // Starts reading the GPU gauges (ringsync_gpu_*, cuda/nvml_sampler.h) from NVML every
  // `period` on a thread of their own. Without NVML or a GPU: one info line, no series.
  void start_gpu_sampling(std::chrono::milliseconds period = std::chrono::seconds(2));

  // A finished collective: its outcome, payload and timings.
  void collective_done(wire::CollectiveKind kind, DType dtype, std::string_view status,
                       std::uint64_t bytes, double seconds, std::size_t ranks);
  void error(std::string_view kind) { errors.with({kind}).inc(); }

  metrics::CounterFamily& collectives;        // op, status
  metrics::CounterFamily& collective_bytes;   // op, dtype
  metrics::HistogramFamily& duration;         // op
  metrics::GaugeFamily& bus_bandwidth;        // op
  metrics::HistogramFamily& rank_wait;        // rank
  metrics::GaugeFamily& stalled_tensors;
  metrics::GaugeFamily& clients;
  metrics::GaugeFamily& jobs;
  metrics::GaugeFamily& registered_bytes;     // memory
  metrics::CounterFamily& staged_bytes;
  metrics::CounterFamily& errors;             // kind
  metrics::GaugeFamily& ring_nodes;
  metrics::GaugeFamily& ring_epoch;
  // Multi-node (service/cluster/).
  metrics::CounterFamily& link_bytes;         // peer, direction
  metrics::GaugeFamily& link_bandwidth;       // peer, direction
  metrics::CounterFamily& ring_operations;    // op
  metrics::CounterFamily& fused_tensors;
  metrics::CounterFamily& inline_operations;
  metrics::HistogramFamily& negotiation;
  metrics::CounterFamily& cache_hits;
  metrics::CounterFamily& cache_misses;
  metrics::CounterFamily& peers_lost;
  metrics::GaugeFamily& build_info;           // version, kernel_isa

 private:
  metrics::Registry& registry_;
  std::unique_ptr<cuda::GpuSampler> gpu_sampler_;
};

}  // namespace ringsync::service
