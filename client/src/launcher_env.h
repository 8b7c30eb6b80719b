// Where a trainer is in its job, from the launcher that started it when
// ringsync's own variables are absent: torchrun (RANK, LOCAL_RANK,
// WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK), Open MPI (OMPI_COMM_WORLD_*) or
// Slurm (SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID, SLURM_NTASKS,
// SLURM_NNODES, SLURM_JOB_ID, and the node names of SLURM_STEP_NODELIST).
// One launcher's variables are taken as a whole,
// in that order (torchrun or mpirun inside a Slurm allocation describe the
// ranks better than the allocation does). ringsync numbers ranks node by
// node (global = node * L + local); a launcher that numbers them otherwise is
// refused with the option that fixes it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace ringsync::client {

struct LauncherPlace {
  std::string launcher;  // "torchrun", "Open MPI", "Slurm": for messages
  int local_rank = 0;
  int local_size = 1;
  int node_rank = 0;
  int num_nodes = 1;
  std::string job_id;  // "" when the launcher names none
  // Every node's ringsyncd control address, "host:port,..." in node order, when
  // the launcher lists the nodes (Slurm's SLURM_STEP_NODELIST, with
  // RINGSYNC_CONTROL_PORT or 29517); "" otherwise. Used when RINGSYNC_NODES is unset.
  std::string nodes;
  std::string nodes_from;  // the variable `nodes` came from, for messages
};

// Every variable launcher_place() reads, for process_environment().
const std::vector<const char*>& launcher_variables();

// The place from the first launcher whose variables are set; nullopt when
// none is; an error when a launcher's variables are malformed or disagree.
Result<std::optional<LauncherPlace>> launcher_place(const std::map<std::string, std::string>& env);

}  // namespace ringsync::client
