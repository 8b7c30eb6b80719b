#include "client/src/launcher_env.h"

#include <charconv>

#include "common/hostlist.h"

namespace ringsync::client {

namespace {

using Env = std::map<std::string, std::string>;

constexpr int kDefaultControlPort = 29517;  // ringsyncd's, service/cluster/job_spec.h

std::optional<std::string> get(const Env& env, const char* name) {
  auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

// A variable that must be there, as a number >= minimum.
Result<int> number(const Env& env, const char* name, int minimum, const std::string& launcher) {
  auto text = get(env, name);
  if (!text) return Status::InvalidArgument(launcher + "'s environment has no " + name);
  int value = 0;
  const char* end = text->data() + text->size();
  auto [ptr, ec] = std::from_chars(text->data(), end, value);
  if (ec != std::errc() || ptr != end || value < minimum)
    return Status::InvalidArgument(std::string(name) + "='" + *text + "' is not an integer >= " +
                                   std::to_string(minimum));
  return value;
}

// Checks a place given by a global rank and size, and fills in the rest.
Result<LauncherPlace> from_global(LauncherPlace p, int rank, int size, const std::string& block_hint) {
  if (p.local_rank >= p.local_size)
    return Status::InvalidArgument(p.launcher + ": local rank " + std::to_string(p.local_rank) +
                                   " is out of range for local size " + std::to_string(p.local_size));
  if (size % p.local_size != 0)
    return Status::InvalidArgument(p.launcher + ": " + std::to_string(size) + " ranks are not the same number on " +
                                   "every node (" + std::to_string(p.local_size) +
                                   " here); ringsync needs as many ranks on every node");
  if (p.num_nodes == 0) p.num_nodes = size / p.local_size;
  if (p.num_nodes * p.local_size != size)
    return Status::InvalidArgument(p.launcher + ": " + std::to_string(size) + " ranks on " +
                                   std::to_string(p.num_nodes) + " nodes are not " + std::to_string(p.local_size) +
                                   " per node; ringsync needs as many ranks on every node");
  if (p.node_rank < 0) p.node_rank = rank / p.local_size;
  if (p.node_rank >= p.num_nodes)
    return Status::InvalidArgument(p.launcher + ": node " + std::to_string(p.node_rank) + " is out of range for " +
                                   std::to_string(p.num_nodes) + " nodes");
  if (rank != p.node_rank * p.local_size + p.local_rank)
    return Status::InvalidArgument(p.launcher + ": rank " + std::to_string(rank) + " is not node " +
                                   std::to_string(p.node_rank) + " x " + std::to_string(p.local_size) +
                                   " + local rank " + std::to_string(p.local_rank) +
                                   "; ringsync numbers ranks node by node: " + block_hint);
  return p;
}

// A launcher that gives the local rank and size and the global rank and
// size (torchrun, Open MPI); the node follows from them.
struct GlobalPlace {
  LauncherPlace place;
  int rank = 0;
  int size = 1;
};
Result<GlobalPlace> global_place(const Env& env, const std::string& launcher, const char* local_rank,
                                 const char* local_size, const char* rank, const char* size) {
  auto l = number(env, local_rank, 0, launcher);
  auto ls = number(env, local_size, 1, launcher);
  auto r = number(env, rank, 0, launcher);
  auto s = number(env, size, 1, launcher);
  for (const auto* x : {&l, &ls, &r, &s})
    if (!x->ok()) return x->status();
  GlobalPlace g{LauncherPlace{launcher, *l, *ls, -1, 0, ""}, *r, *s};
  return g;
}

Result<LauncherPlace> torchrun(const Env& env) {
  auto g = global_place(env, "torchrun", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "RANK", "WORLD_SIZE");
  if (!g.ok()) return g.status();
  LauncherPlace& p = g->place;
  if (get(env, "GROUP_RANK")) {
    auto group = number(env, "GROUP_RANK", 0, p.launcher);
    if (!group.ok()) return group.status();
    p.node_rank = *group;
  }
  if (auto id = get(env, "TORCHELASTIC_RUN_ID"); id && *id != "none") {
    p.job_id = "torchrun-" + *id;
  } else if (auto addr = get(env, "MASTER_ADDR"), port = get(env, "MASTER_PORT"); addr && port) {
    p.job_id = "torchrun-" + *addr + ":" + *port;
  }
  return from_global(p, g->rank, g->size, "start torchrun with the same --nproc-per-node on every node");
}

Result<LauncherPlace> open_mpi(const Env& env) {
  auto g = global_place(env, "Open MPI", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
                        "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE");
  if (!g.ok()) return g.status();
  LauncherPlace& p = g->place;
  if (auto ns = get(env, "PMIX_NAMESPACE")) {
    p.job_id = "mpi-" + *ns;
  } else if (auto id = get(env, "OMPI_MCA_ess_base_jobid")) {
    p.job_id = "mpi-" + *id;
  }
  return from_global(p, g->rank, g->size, "run mpirun with --map-by slot (or ppr:L:node)");
}

// The control port of every node's ringsyncd when the node list comes from a launcher.
Result<int> control_port(const Env& env) {
  auto text = get(env, "RINGSYNC_CONTROL_PORT");
  if (!text) return kDefaultControlPort;
  int port = 0;
  const char* end = text->data() + text->size();
  auto [ptr, ec] = std::from_chars(text->data(), end, port);
  if (ec != std::errc() || ptr != end || port < 1 || port > 65535)
    return Status::InvalidArgument("RINGSYNC_CONTROL_PORT='" + *text + "' is not a port (1-65535)");
  return port;
}

// The step's nodes (SLURM_STEP_NODELIST; a batch script's own tasks have only
// SLURM_JOB_NODELIST, right when the step spans the whole allocation), each at
// the daemons' control port. Left unset when the list does not have the
// step's node count: then RINGSYNC_NODES or a rendezvous must say.
Status slurm_nodes(const Env& env, int count, LauncherPlace& p) {
  const char* name = get(env, "SLURM_STEP_NODELIST") ? "SLURM_STEP_NODELIST"
                     : get(env, "SLURM_JOB_NODELIST") ? "SLURM_JOB_NODELIST"
                                                      : "SLURM_NODELIST";
  auto list = get(env, name);
  if (!list) return Status::Ok();
  auto hosts = expand_hostlist(*list);
  if (!hosts.ok()) return Status::InvalidArgument(std::string("Slurm: ") + name + ": " + hosts.status().message());
  if (hosts->size() != static_cast<std::size_t>(count)) return Status::Ok();
  auto port = control_port(env);
  if (!port.ok()) return port.status();
  for (const auto& host : *hosts) {
    if (!p.nodes.empty()) p.nodes += ',';
    p.nodes += host;
    p.nodes += ':' + std::to_string(*port);
  }
  p.nodes_from = name;
  return Status::Ok();
}

Result<LauncherPlace> slurm(const Env& env) {
  LauncherPlace p{"Slurm"};
  auto local = number(env, "SLURM_LOCALID", 0, p.launcher);
  auto node = number(env, "SLURM_NODEID", 0, p.launcher);
  auto rank = number(env, "SLURM_PROCID", 0, p.launcher);
  auto size = get(env, "SLURM_NTASKS") ? number(env, "SLURM_NTASKS", 1, p.launcher)
                                       : number(env, "SLURM_NPROCS", 1, p.launcher);
  auto nodes = get(env, "SLURM_STEP_NUM_NODES") ? number(env, "SLURM_STEP_NUM_NODES", 1, p.launcher)
               : get(env, "SLURM_NNODES")       ? number(env, "SLURM_NNODES", 1, p.launcher)
                                                : number(env, "SLURM_JOB_NUM_NODES", 1, p.launcher);
  for (const auto* r : {&local, &node, &rank, &size, &nodes})
    if (!r->ok()) return r->status();
  if (*size % *nodes != 0)
    return Status::InvalidArgument("Slurm: " + std::to_string(*size) + " tasks on " + std::to_string(*nodes) +
                                   " nodes are not the same number on every node; use --ntasks-per-node");
  p.local_rank = *local;
  p.local_size = *size / *nodes;
  p.node_rank = *node;
  p.num_nodes = *nodes;
  if (auto job = get(env, "SLURM_JOB_ID")) {
    p.job_id = "slurm-" + *job;
    if (auto step = get(env, "SLURM_STEP_ID")) p.job_id += "." + *step;
  }
  if (*nodes > 1) RINGSYNC_RETURN_IF_ERROR(slurm_nodes(env, *nodes, p));
  return from_global(p, *rank, *size, "run srun with --distribution=block");
}

}  // namespace

const std::vector<const char*>& launcher_variables() {
  static const std::vector<const char*> names = {
      "LOCAL_RANK", "LOCAL_WORLD_SIZE", "RANK", "WORLD_SIZE", "GROUP_RANK", "TORCHELASTIC_RUN_ID", "MASTER_ADDR",
      "MASTER_PORT", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_RANK",
      "OMPI_COMM_WORLD_SIZE", "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "SLURM_LOCALID", "SLURM_NODEID",
      "SLURM_PROCID", "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_STEP_NUM_NODES", "SLURM_NNODES",
      "SLURM_JOB_NUM_NODES", "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST",
      "SLURM_NODELIST", "RINGSYNC_CONTROL_PORT"};
  return names;
}

Result<std::optional<LauncherPlace>> launcher_place(const Env& env) {
  std::optional<Result<LauncherPlace>> found;
  if (get(env, "LOCAL_RANK") && get(env, "LOCAL_WORLD_SIZE")) {
    found = torchrun(env);
  } else if (get(env, "OMPI_COMM_WORLD_LOCAL_RANK")) {
    found = open_mpi(env);
  } else if (get(env, "SLURM_LOCALID") && get(env, "SLURM_PROCID")) {
    found = slurm(env);
  }
  if (!found) return std::optional<LauncherPlace>();
  if (!found->ok()) return found->status();
  return std::optional<LauncherPlace>(std::move(*found).value());
}

}  // namespace ringsync::client
