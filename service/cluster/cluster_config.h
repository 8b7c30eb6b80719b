// The settings of the daemon's multi-node jobs (the cluster part of
// service/daemon_config.h, read by every part of a job's ring).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/hostfile.h"
#include "service/cluster/ring_settings.h"

namespace ringsync::service::formation {
class ControlTls;
}

namespace ringsync::service::cluster {

// Multi-node settings (docs/cluster.md): the tunables every multi-node job of
// the daemon runs with, and the one job the daemon may be pre-configured with
// (--hostfile or --hosts, --node-rank, --job-id, --job-token). Jobs that
// trainers describe bring their own nodes, rank and token.
struct ClusterConfig {
  // The pre-configured job's nodes by node rank (--hostfile, or --hosts
  // a:4,b:4); empty when there is none. Every node's slots must be equal.
  std::vector<HostEntry> nodes;
  std::uint32_t node_rank = 0;     // --node-rank: this daemon's line in the list
  // --control-address: where this daemon listens for the other nodes of every
  // job; default the pre-configured job's entry on node 0, else none (the
  // daemon then serves single-node jobs, and multi-node ones where it is not
  // node 0).
  std::string control_address;
  std::string job_id;              // --job-id, default "default": the pre-configured job's id
  std::string token;               // --job-token: its shared secret, "" for none
  std::string rendezvous;          // --rendezvous: etcd://HOST:PORT[,...] for jobs without a node list
  std::string advertise_address;   // --advertise-address: this daemon's control address for the rendezvous
  std::chrono::nanoseconds rendezvous_timeout{0};  // --rendezvous-timeout, default 5s: one store request
  std::chrono::nanoseconds rendezvous_lease{0};    // --rendezvous-lease, default 10s
  std::chrono::nanoseconds elastic_timeout{0};     // --elastic-timeout, default 60s
  std::chrono::nanoseconds join_timeout{0};        // --join-timeout, default 60s
  std::chrono::nanoseconds heartbeat_interval{0};  // --heartbeat-interval, 500ms
  std::chrono::nanoseconds peer_timeout{0};        // --peer-timeout, default 5s
  std::chrono::nanoseconds progress_timeout{0};    // --progress-timeout, default 20s; 0: off (docs/cluster.md, "Deadlines")
  std::chrono::nanoseconds cycle_time{0};          // --cycle-time, default 1ms
  std::uint64_t fusion_threshold_bytes = 0;        // --fusion-threshold, 128MiB
  // --ring-chunk-bytes (512KiB), --response-cache (1024), --inline-bytes
  // (256KiB), --algorithm and its limits, --verify-results: every node of a
  // ring must run with the same (ring_settings.h).
  RingSettings ring;
  std::uint32_t ring_window = 0;                   // --ring-window, default 4
  std::uint64_t gpu_staging_chunk_bytes = 0;       // --gpu-staging-chunk, 4MiB; 0: whole buffers
  std::string ucx_transports;                      // --ucx-transports, "" = UCX's choice
  std::string ucx_net_devices;                     // --ucx-net-devices, "" = UCX's
  std::string timeline_path;                       // --timeline: Chrome trace JSON
  // --tls-cert, --tls-key, --tls-ca, loaded and checked: mutual TLS on every
  // control connection (service/formation/control_tls.h); null: plain text.
  std::shared_ptr<formation::ControlTls> tls;
  std::chrono::nanoseconds busy_poll{0};           // DaemonConfig::busy_poll, for the ring's thread
  // Where threads the control thread creates (UCX's, the ring's) run: the
  // daemon's CPUs when --control-cpus keeps the control thread on fewer
  // (service/threads/thread_cpus.h). Empty: where the control thread runs.
  std::vector<int> thread_cpus;

  // Set when the daemon runs as a step of a Slurm job (SLURM_JOB_ID and
  // SLURM_STEP_ID, no --hostfile/--hosts): the job id, for the log. Its
  // --socket and --control-address then default to ringsyncd-slurm-<job>.sock
  // and 0.0.0.0:29517; the trainers' steps describe their jobs themselves
  // (SLURM_STEP_NODELIST, SLURM_NODEID).
  std::string slurm_job;
  std::string slurm_node;  // SLURM_NODEID: this node's place in the daemons' step

  // Whether the daemon is pre-configured with a multi-node job.
  bool enabled() const { return !nodes.empty(); }
  std::uint32_t slots() const { return nodes.empty() ? 0 : nodes.front().slots; }
};

}  // namespace ringsync::service::cluster
