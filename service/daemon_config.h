// The daemon's tunables: one table (flags, RINGSYNC_* variables, config file keys)
// and the typed, validated struct the rest of the daemon reads.
//
//   auto env = service::daemon_environment();
//   auto cfg = config::Config::parse(service::daemon_tunables(), argc, argv, env);
//   auto daemon = service::daemon_config_from(*cfg);
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/hostfile.h"
#include "common/socket_path.h"
#include "common/status.h"
#include "service/integrity/verify_results.h"
#include "service/local/client_access.h"
#include "service/route/route.h"

namespace ringsync::service {

namespace cluster {
class ControlTls;
}

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
  std::uint64_t inline_bytes = 0;                  // --inline-bytes, default 256KiB
  route::DataRoutes data_routes;                   // --algorithm, --direct-max-bytes, --rhd-max-bytes (service/route/route.h)
  std::size_t response_cache_capacity = 0;         // --response-cache, default 1024
  std::uint64_t ring_chunk_bytes = 0;              // --ring-chunk-bytes, 512KiB
  std::uint32_t ring_window = 0;                   // --ring-window, default 4
  std::uint64_t gpu_staging_chunk_bytes = 0;       // --gpu-staging-chunk, 4MiB; 0: whole buffers
  integrity::VerifyResults verify_results = integrity::VerifyResults::kOff;  // --verify-results
  std::string ucx_transports;                      // --ucx-transports, "" = UCX's choice
  std::string ucx_net_devices;                     // --ucx-net-devices, "" = UCX's
  std::string timeline_path;                       // --timeline: Chrome trace JSON
  // --tls-cert, --tls-key, --tls-ca, loaded and checked: mutual TLS on every
  // control connection (service/cluster/control_tls.h); null: plain text.
  std::shared_ptr<cluster::ControlTls> tls;
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

struct DaemonConfig {
  // --socket. Default: $XDG_RUNTIME_DIR/ringsync/ringsyncd.sock when XDG_RUNTIME_DIR
  // is set, else /run/ringsync/ringsyncd.sock as root, else
  // /tmp/ringsync-<uid>/ringsyncd.sock (see default_socket_path()).
  std::string socket_path;
  // --allow-uid / --allow-gid: who besides the daemon's uid may use the socket.
  local::AccessPolicy access;
  // --metrics-address, default 127.0.0.1:9400. "" when the metrics server is off
  // ("off" or an empty value); otherwise HOST:PORT with IPv6 hosts in brackets.
  std::string metrics_address;
  // --collective-timeout, default 300s: a collective not completed by all local
  // ranks in this time fails with a timeout error.
  std::chrono::nanoseconds collective_timeout{0};
  // --stall-warning, default 60s: the stall inspector reports ranks that have not
  // submitted a tensor after this long.
  std::chrono::nanoseconds stall_warning{0};
  // --max-frame-bytes, default 64KiB: larger control frames are rejected.
  std::uint64_t max_frame_bytes = 0;
  // --max-client-buffer-bytes, default 64GiB: total shared memory one client may
  // allocate.
  std::uint64_t max_client_buffer_bytes = 0;
  // --reduce-threads, default 0 = one per core. Always resolved here: at least 1.
  int reduce_threads = 0;
  // --reduce-chunk-bytes, default 1MiB: granularity of the work split across reduce
  // threads; at least 4KiB and a multiple of 64 bytes.
  std::uint64_t reduce_chunk_bytes = 0;
  // --ready-file, default "": when set, written (tmp + rename) once the daemon is
  // listening, with lines "socket=PATH" and "metrics=HOST:PORT".
  std::string ready_file;
  // --log-level (default info) and --log-subsys (default all), in the syntax of
  // RINGSYNC_LOG_LEVEL / RINGSYNC_LOG_SUBSYS; checked here, canonical form.
  std::string log_level;
  std::string log_subsys;
  // --handshake-timeout, default 10s: a connection that has not said hello by then
  // is closed.
  std::chrono::nanoseconds client_handshake_timeout{0};
  // --busy-poll, default 100us: after a small collective's events the control
  // loop polls instead of sleeping for this long (service/threads/busy_poll.h); 0: never.
  std::chrono::nanoseconds busy_poll{0};
  // --client-channel, default shm: trainers that ask get a shared-memory
  // channel for their frames (common/shm_channel.h); "socket" keeps every
  // frame on the Unix socket.
  bool shm_channel = true;
  // --control-cpus, default none: the CPUs of the control thread
  // (service/threads/thread_cpus.h); empty leaves it to the scheduler.
  std::vector<int> control_cpus;
  // --rank-liveness-timeout, default 30s (0: off): a rank whose process is
  // stopped, or that stops answering while it waits, this long fails its job.
  std::chrono::nanoseconds rank_liveness_timeout{0};
  // Limits that protect the daemon (--max-jobs, --max-job-ranks,
  // --max-job-buffer-bytes): beyond them a job is refused, the others run on.
  std::size_t max_jobs = 0;
  std::uint32_t max_job_ranks = 0;        // ranks of one job on this node
  std::uint64_t max_job_buffer_bytes = 0;  // shared memory of one job's ranks here
  // --job-metrics-linger, default 5m: how long an ended job's series stay in
  // /metrics (so the last scrapes see its final counts).
  std::chrono::nanoseconds job_metrics_linger{0};
  // Committed states trainers keep in this daemon (service/local/kept_states.h):
  // --max-kept-state-bytes for the node, gone --kept-state-linger after their
  // job's last rank left.
  std::uint64_t max_kept_state_bytes = 0;
  double link_rate_bytes_per_second = 0;  // --link-rate; 0: not set
  std::string serve_rendezvous;           // --serve-rendezvous HOST:PORT; "": none
  std::chrono::nanoseconds kept_state_linger{0};

  ClusterConfig cluster;
};

const std::vector<config::Tunable>& daemon_tunables();

// What the daemon reads from the environment: RINGSYNC_* and XDG_RUNTIME_DIR.
std::map<std::string, std::string> daemon_environment();

// The socket path used when --socket is not given. `env` supplies XDG_RUNTIME_DIR
// (ignored unless it is an absolute path).
using ringsync::default_socket_path;  // common/socket_path.h, shared with the client

// Resolves the defaults that depend on the host (socket path from cfg.environment()
// and the user id, reduce threads from the core count) and checks the values
// together: timeouts above zero, frame and chunk sizes within bounds, thread count
// in range, a socket path that fits a Unix address, a valid log level and filter.
Result<DaemonConfig> daemon_config_from(const config::Config& cfg);

}  // namespace ringsync::service
