#include "service/local/job_description.h"

#include "common/hostfile.h"

namespace ringsync::service::local {

namespace {

std::string node_list_text(const std::vector<HostEntry>& nodes) {
  std::string text;
  for (const auto& n : nodes) {
    if (!text.empty()) text += ",";
    text += cluster::control_address(n);
  }
  return text;
}

}  // namespace

Result<DescribedJob> describe_job(const wire::Hello& hello, const JobDefaults& defaults) {
  DescribedJob out;
  cluster::JobSpec& job = out.spec;
  job.id = hello.job_id;
  job.token = hello.job_token;
  job.slots = hello.local_size;
  const std::string who = "job '" + hello.job_id + "'";
  if (hello.max_nodes > 0) {
    // Elastic: the rendezvous places this node anew for every run.
    if (hello.min_nodes == 0 || hello.min_nodes > hello.max_nodes || !hello.nodes.empty() || hello.node_rank >= 0)
      return Status::InvalidArgument(who + ": an elastic job needs 1 <= RINGSYNC_MIN_NODES <= RINGSYNC_MAX_NODES, "
                                     "and no RINGSYNC_NODES or RINGSYNC_NODE_RANK (its rendezvous places the nodes)");
    job.min_nodes = hello.min_nodes;
    job.max_nodes = hello.max_nodes;
    job.num_nodes = hello.num_nodes == 0 ? hello.max_nodes : hello.num_nodes;
    if (job.num_nodes < job.min_nodes || job.num_nodes > job.max_nodes)
      return Status::InvalidArgument(who + ": RINGSYNC_NUM_NODES=" + std::to_string(job.num_nodes) +
                                     " is outside RINGSYNC_MIN_NODES..RINGSYNC_MAX_NODES");
    job.rendezvous = hello.rendezvous.empty() ? defaults.rendezvous : hello.rendezvous;
    if (job.rendezvous.empty())
      return Status::InvalidArgument(who + " is elastic, so its nodes find each other through a rendezvous store: "
                                     "set RINGSYNC_RENDEZVOUS=etcd://HOST:PORT, or start ringsyncd with --rendezvous");
    out.rank_known = false;
    return out;
  }
  if (!hello.nodes.empty()) {
    auto nodes = parse_node_list(hello.nodes, hello.local_size);
    if (!nodes.ok()) return Status::InvalidArgument("RINGSYNC_NODES of " + who + ": " + nodes.status().message());
    job.nodes = std::move(nodes).value();
    if (hello.num_nodes != 0 && hello.num_nodes != job.nodes.size())
      return Status::InvalidArgument(who + ": RINGSYNC_NODES names " + std::to_string(job.nodes.size()) +
                                     " node(s) but the launcher says " + std::to_string(hello.num_nodes) +
                                     " (RINGSYNC_NUM_NODES, WORLD_SIZE/LOCAL_WORLD_SIZE or SLURM_NNODES); make "
                                     "them agree");
    job.num_nodes = static_cast<std::uint32_t>(job.nodes.size());
  } else {
    job.num_nodes = hello.num_nodes == 0 ? 1 : hello.num_nodes;
  }
  if (job.num_nodes == 1) {
    if (hello.node_rank > 0)
      return Status::InvalidArgument(who + " has one node, so its node rank must be 0, not " +
                                     std::to_string(hello.node_rank) + " (RINGSYNC_NODE_RANK)");
    job.node_rank = 0;
    job.nodes.clear();  // one node needs no control plane
    return out;
  }
  if (hello.node_rank >= static_cast<std::int64_t>(job.num_nodes))
    return Status::InvalidArgument(who + " has " + std::to_string(job.num_nodes) + " nodes, so node rank " +
                                   std::to_string(hello.node_rank) + " (RINGSYNC_NODE_RANK) is out of range");
  if (!job.nodes.empty()) {
    if (hello.node_rank < 0)
      return Status::InvalidArgument(who + " names its nodes (RINGSYNC_NODES) but not which one this is: set "
                                     "RINGSYNC_NODE_RANK (0 to " + std::to_string(job.num_nodes - 1) + ")");
    job.node_rank = static_cast<std::uint32_t>(hello.node_rank);
    const HostEntry& self = job.nodes[job.node_rank];
    const std::uint16_t port = self.port ? self.port : cluster::kDefaultControlPort;
    if (defaults.control_port != 0 && port != defaults.control_port)
      return Status::InvalidArgument(who + ": RINGSYNC_NODES names " + cluster::control_address(self) +
                                     " as node " + std::to_string(job.node_rank) +
                                     " (this node), but this ringsyncd listens for the other nodes on port " +
                                     std::to_string(defaults.control_port) +
                                     " (--control-address); list each node's ringsyncd control address");
    return out;
  }
  job.rendezvous = hello.rendezvous.empty() ? defaults.rendezvous : hello.rendezvous;
  if (job.rendezvous.empty())
    return Status::InvalidArgument(
        who + " has " + std::to_string(job.num_nodes) +
        " nodes but says neither where they are nor how to find them: set RINGSYNC_NODES=host:port,... (each "
        "node's ringsyncd control address, in node-rank order) and RINGSYNC_NODE_RANK, or "
        "RINGSYNC_RENDEZVOUS=etcd://HOST:PORT, or start ringsyncd with --rendezvous");
  if (hello.node_rank >= 0) {
    job.node_rank = static_cast<std::uint32_t>(hello.node_rank);
  } else {
    out.rank_known = false;
  }
  return out;
}

std::string description_mismatch(const DescribedJob& job, const DescribedJob& rank) {
  const cluster::JobSpec& a = job.spec;
  const cluster::JobSpec& b = rank.spec;
  const auto differs = [](const std::string& what, const std::string& here, const std::string& first) {
    return what + " is '" + here + "' for this rank but '" + first + "' for the job's first rank on this node";
  };
  if (a.min_nodes != b.min_nodes || a.max_nodes != b.max_nodes)
    return differs("the elastic range (RINGSYNC_MIN_NODES..RINGSYNC_MAX_NODES)",
                   std::to_string(b.min_nodes) + ".." + std::to_string(b.max_nodes),
                   std::to_string(a.min_nodes) + ".." + std::to_string(a.max_nodes));
  if (a.num_nodes != b.num_nodes)
    return differs("the node count", std::to_string(b.num_nodes), std::to_string(a.num_nodes));
  if (node_list_text(a.nodes) != node_list_text(b.nodes))
    return differs("RINGSYNC_NODES", node_list_text(b.nodes), node_list_text(a.nodes));
  if (a.rendezvous != b.rendezvous) return differs("the rendezvous", b.rendezvous, a.rendezvous);
  if (job.rank_known != rank.rank_known || (rank.rank_known && a.node_rank != b.node_rank))
    return differs("the node rank", rank.rank_known ? std::to_string(b.node_rank) : "unset",
                   job.rank_known ? std::to_string(a.node_rank) : "unset");
  if (a.token != b.token) return "the job token (RINGSYNC_JOB_TOKEN) differs from the job's first rank's";
  return "";
}

}  // namespace ringsync::service::local
