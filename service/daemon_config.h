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
#include "service/cluster/cluster_config.h"
#include "service/local/client_access.h"

namespace ringsync::service {

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

  cluster::ClusterConfig cluster;
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
