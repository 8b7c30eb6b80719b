#include "service/observe/daemon_metrics.h"

#include <string>

#include "common/reduce.h"
#include "common/version.h"
#include "cuda/nvml_sampler.h"

namespace ringsync::service::observe {

std::string status_label(StatusCode code) {
  std::string label = status_code_name(code);
  for (char& c : label)
    if (c == ' ') c = '_';
  return label;
}

DaemonMetrics::DaemonMetrics(metrics::Registry& r)
    : collectives(r.counter("ringsync_collectives_total",
                            "Collectives finished, by job, collective and outcome.",
                            {"job_id", "op", "status"})),
      collective_bytes(r.counter("ringsync_collective_bytes_total",
                                 "Payload bytes of successful collectives (per rank's result).",
                                 {"job_id", "op", "dtype"})),
      duration(r.histogram("ringsync_collective_duration_seconds",
                           "Time from the last rank's submission to completion.",
                           metrics::exponential_buckets(1e-5, 4.0, 12), {"job_id", "op"})),
      bus_bandwidth(r.gauge("ringsync_bus_bandwidth_bytes_per_second",
                            "Bus bandwidth (nccl-tests definition) of the latest successful collective, "
                            "of any size (over a window: ringsync_bus_bytes_total / the duration's _sum).",
                            {"job_id", "op"})),
      bus_bytes(r.counter("ringsync_bus_bytes_total",
                          "Payload bytes of successful collectives times nccl-tests' bus factor: its rate "
                          "over the rate of ringsync_collective_duration_seconds_sum is the bus bandwidth.",
                          {"job_id", "op"})),
      device_collectives(r.counter("ringsync_device_collectives_total",
                                   "Successful collectives on GPU buffers.", {"job_id", "op"})),
      rank_wait(r.histogram("ringsync_rank_wait_seconds",
                            "How long after the first rank each local rank submitted a "
                            "collective (stragglers show large values).",
                            metrics::exponential_buckets(1e-5, 4.0, 12), {"job_id", "rank"})),
      rank_last(r.counter("ringsync_rank_last_total",
                          "Collectives in which this local rank submitted last (counted with more than "
                          "one local rank): the straggler of each step.",
                          {"job_id", "rank"})),
      stall_reports(r.counter("ringsync_stall_reports_total",
                              "Stall warnings logged: a tensor some ranks or nodes submitted and others "
                              "had not, for longer than --stall-warning.",
                              {"job_id"})),
      stalled_tensors(r.gauge("ringsync_stalled_tensors",
                              "Tensors some ranks submitted and others have not, for longer "
                              "than --stall-warning.")),
      clients(r.gauge("ringsync_clients", "Connected trainer processes.")),
      jobs(r.gauge("ringsync_jobs", "Jobs with at least one connected rank.")),
      kept_state_bytes(r.gauge("ringsync_kept_state_bytes",
                               "Memory of the committed states trainers keep in this daemon (ringsync.elastic).")),
      registered_bytes(r.gauge("ringsync_registered_buffer_bytes",
                               "Bytes of buffers shared with trainers.", {"memory"})),
      staged_bytes(r.counter("ringsync_staged_bytes_total",
                             "Bytes the client library copied through staging buffers because "
                             "the data was not in a shared buffer.")),
      errors(r.counter("ringsync_errors_total", "Errors by kind.", {"kind"})),
      ring_nodes(r.gauge("ringsync_ring_nodes", "Nodes in the job's current ring (0 while it is not formed).",
                         {"job_id"})),
      ring_epoch(r.gauge("ringsync_ring_epoch", "Membership epoch of the job's ring.", {"job_id"})),
      ring_recovery(r.gauge("ringsync_ring_recovery_seconds",
                            "Seconds from the loss of the job's last run to this node's place in the next "
                            "(elastic jobs: the next roster).",
                            {"job_id"})),
      link_bytes(r.counter("ringsync_link_bytes_total",
                           "Bytes moved to (tx) and from (rx) each peer node, by plane: data (the ring, "
                           "over UCX) or control (plans, small allreduces exchanged directly, heartbeats).",
                           {"job_id", "peer", "peer_address", "direction", "plane"})),
      link_bandwidth(r.gauge("ringsync_link_bandwidth_bytes_per_second",
                             "Recent bytes per second to (tx) and from (rx) each peer node, both planes, over "
                             "the last sweep period.",
                             {"job_id", "peer", "peer_address", "direction"})),
      link_send_busy(r.counter("ringsync_link_send_busy_seconds_total",
                               "Seconds during which at least one data-plane send to the peer was in flight: "
                               "data bytes sent over these seconds is what the link achieves while it works "
                               "(a ring runs all its links at the pace of the slowest).",
                               {"job_id", "peer", "peer_address"})),
      link_rate(r.gauge("ringsync_link_rate_bytes_per_second",
                        "The nodes' link rate as configured (ringsyncd --link-rate); absent when not set.")),
      ring_operations(r.counter("ringsync_ring_operations_total",
                                "Planned operations run (fused tensors count once; incl. inline ones).",
                                {"op"})),
      data_operations(r.counter("ringsync_data_plane_operations_total",
                                "Operations run over the data plane between nodes, by algorithm: ring (the "
                                "pipelined ring), halving-doubling or direct (small and mid-size allreduces; --algorithm).",
                                {"algorithm"})),
      gathered_bytes(r.counter("ringsync_gathered_bytes_total",
                               "Bytes reduced or copied from local ranks' buffers into ring buffers before they "
                               "go between the nodes (none for a ring allreduce of one local input: the ring "
                               "reads it where it lies).")),
      fused_tensors(r.counter("ringsync_fused_tensors_total",
                              "Tensors that ran inside ring operations.")),
      inline_operations(r.counter("ringsync_inline_operations_total",
                                  "Small allreduces finished with no ring: path=\"plan\" (node 0 reduced, the "
                                  "plan carried the result) or path=\"direct\" (the nodes exchanged their "
                                  "local reductions).",
                                  {"path"})),
      negotiation(r.histogram("ringsync_negotiation_seconds",
                              "Time from a tensor being ready on this node to the coordinator's "
                              "plan naming it, or to the last node's contribution of a directly "
                              "exchanged one (includes waiting for the other nodes).",
                              metrics::exponential_buckets(1e-5, 4.0, 12))),
      cache_hits(r.counter("ringsync_response_cache_hits_total",
                           "Tensors announced to the coordinator as a response-cache bit.")),
      cache_misses(r.counter("ringsync_response_cache_misses_total",
                             "Tensors announced to the coordinator in full.")),
      peer_transports(r.gauge("ringsync_peer_transports_info",
                              "What UCX chose for the link to each peer node of the job's ring, as transport/"
                              "device lanes (tcp/eth0, rc_mlx5/mlx5_0:1, ...), and why transports it could "
                              "otherwise use were avoided (avoided; empty when none were); the value is always 1.",
                              {"job_id", "peer", "peer_address", "transports", "avoided"})),
      peers_lost(r.counter("ringsync_peers_lost_total",
                           "Times the job's ring was torn down because a node was lost or left.", {"job_id"})),
      missed_wakeups(r.counter("ringsync_data_plane_missed_wakeups_total",
                               "Times the data plane's thread, asleep with operations in flight, found messages "
                               "that had arrived without waking it (its transport lost the wake-up; each costs "
                               "up to 100 ms).",
                               {"job_id"})),
      integrity_failures(r.counter("ringsync_integrity_failures_total",
                                   "Collectives the result check (--verify-results) failed because the nodes' "
                                   "copies of a result differ: silent data corruption in a node's memory or on the "
                                   "network.",
                                   {"job_id"})),
      build_info(r.gauge("ringsync_build_info", "Build information; the value is always 1.",
                         {"version", "kernel_isa"})),
      gpu_devices(r.gauge("ringsync_gpu_devices",
                          "GPUs NVML reports on this node (0 without NVML or a GPU: no ringsync_gpu_* series).")),
      registry_(r) {
  registered_bytes.with({"host"}).set(0);
  gpu_devices.with().set(0);
  for (ErrorKind kind : counted_from_start()) errors.with({label(kind)}).inc(0);
  build_info.with({kVersion, reduce::kernel_isa()}).set(1);
}

DaemonMetrics::~DaemonMetrics() = default;

void DaemonMetrics::start_gpu_sampling(std::chrono::milliseconds period) {
  if (!gpu_sampler_) gpu_sampler_ = cuda::GpuSampler::start(registry_, period);
  gpu_devices.with().set(static_cast<double>(gpu_sampler_->gpus()));
}

void DaemonMetrics::collective_done(std::string_view job, wire::CollectiveKind kind, DType dtype,
                                    std::string_view status, std::uint64_t bytes, double seconds,
                                    std::size_t ranks, bool device) {
  const std::string_view op = wire::collective_kind_name(kind);
  collectives.with({job, op, status}).inc();
  if (status != "ok") return;
  duration.with({job, op}).observe(seconds);
  if (!wire::moves_data(kind)) return;
  collective_bytes.with({job, op, dtype_name(dtype)}).inc(static_cast<double>(bytes));
  if (device) device_collectives.with({job, op}).inc();
  const double bus = static_cast<double>(bytes) * wire::traits(kind).bus_factor(static_cast<double>(ranks));
  bus_bytes.with({job, op}).inc(bus);
  if (seconds > 0) bus_bandwidth.with({job, op}).set(bus / seconds);
}

void DaemonMetrics::set_link_rate(double bytes_per_second) {
  if (bytes_per_second > 0) link_rate.with().set(bytes_per_second);
}

void DaemonMetrics::forget_job(std::string_view job) {
  collectives.erase_where("job_id", job);
  collective_bytes.erase_where("job_id", job);
  duration.erase_where("job_id", job);
  bus_bandwidth.erase_where("job_id", job);
  rank_wait.erase_where("job_id", job);
  ring_nodes.erase_where("job_id", job);
  ring_recovery.erase_where("job_id", job);
  ring_epoch.erase_where("job_id", job);
  link_bytes.erase_where("job_id", job);
  link_bandwidth.erase_where("job_id", job);
  peer_transports.erase_where("job_id", job);
  peers_lost.erase_where("job_id", job);
  missed_wakeups.erase_where("job_id", job);
  integrity_failures.erase_where("job_id", job);
  bus_bytes.erase_where("job_id", job);
  device_collectives.erase_where("job_id", job);
  rank_last.erase_where("job_id", job);
  stall_reports.erase_where("job_id", job);
  link_send_busy.erase_where("job_id", job);
}

}  // namespace ringsync::service::observe
