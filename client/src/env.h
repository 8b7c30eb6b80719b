// Connection settings: rs_config_t fields, else RINGSYNC_* environment
// variables, else defaults. Resolved once per rs_connect().
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>

#include "common/socket_path.h"
#include "common/status.h"
#include "ringsync/ringsync.h"

namespace ringsync::client {

// The environment variables the client reads, by name.
using Environment = std::map<std::string, std::string>;

inline constexpr int kDefaultConnectTimeoutMs = 10000;
inline constexpr int kDefaultBusyPollUs = 1000;
inline constexpr int kMaxBusyPollUs = 10000;

struct Settings {
  std::string socket_path;
  std::string job_id;
  int local_rank = 0;
  int local_size = 1;
  std::chrono::milliseconds connect_timeout{kDefaultConnectTimeoutMs};
  // RINGSYNC_BUSY_POLL_US: how long a thread waiting for a small collective
  // polls the daemon's socket before it sleeps (client/src/progress.h); 0
  // never polls.
  std::chrono::microseconds busy_poll{kDefaultBusyPollUs};
  // RINGSYNC_CHANNEL: shm (default) asks the daemon for a shared-memory
  // channel; socket sends every frame over the Unix socket.
  bool shm_channel = true;
  // The job as the launcher described it (sent in the hello): the node
  // count (0: not said), this node's rank (-1: not said), the daemons'
  // control addresses (RINGSYNC_NODES), a rendezvous (RINGSYNC_RENDEZVOUS)
  // and the job's token (RINGSYNC_JOB_TOKEN, or read from the file
  // RINGSYNC_JOB_TOKEN_FILE names: common/job_token_file.h).
  int num_nodes = 0;
  int node_rank = -1;
  std::string nodes;
  std::string nodes_from = "RINGSYNC_NODES";  // or the launcher's variable (SLURM_STEP_NODELIST)
  std::string rendezvous;
  std::string job_token;
  // An elastic job (docs/elastic.md): RINGSYNC_MIN_NODES..RINGSYNC_MAX_NODES;
  // 0 and 0: a job of a fixed size.
  int min_nodes = 0;
  int max_nodes = 0;
  // Where the ranks came from: "ringsync" (RINGSYNC_* or the config), a
  // launcher's name (client/src/launcher_env.h), or "default" (rank 0 of 1).
  std::string place_from = "default";
};

// RINGSYNC_SOCKET, RINGSYNC_JOB_ID, RINGSYNC_LOCAL_RANK, RINGSYNC_LOCAL_SIZE,
// RINGSYNC_NODE_RANK, RINGSYNC_NUM_NODES, RINGSYNC_NODES, RINGSYNC_RENDEZVOUS,
// RINGSYNC_JOB_TOKEN, RINGSYNC_JOB_TOKEN_FILE, RINGSYNC_MIN_NODES, RINGSYNC_MAX_NODES, RINGSYNC_BUSY_POLL_US,
// RINGSYNC_CHANNEL, XDG_RUNTIME_DIR
// and the launchers' variables (launcher_env.h) from the process environment
// (the ones that are set).
Environment process_environment();

// Where the daemon listens by default (common/socket_path.h, shared with ringsyncd).
using ringsync::default_socket_path;

// Fills the unset fields of `config` (NULL: all of them) from `env` and the
// defaults. The ranks come from the config or RINGSYNC_LOCAL_RANK and
// RINGSYNC_LOCAL_SIZE (with RINGSYNC_NODE_RANK and RINGSYNC_NUM_NODES), else
// from a launcher's variables (torchrun, Open MPI, Slurm; launcher_env.h),
// each source taken as a whole; without any, the process is rank 0 of 1.
// Errors (invalid argument) name the field or variable and say how to fix it.
Result<Settings> resolve_settings(const rs_config_t* config, const Environment& env, uid_t uid);

}  // namespace ringsync::client
