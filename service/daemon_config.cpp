#include "service/daemon_config.h"

#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "common/cpu_list.h"
#include "common/job_token_file.h"
#include "common/log.h"
#include "common/units.h"
#include "common/wire.h"
#include "service/formation/control_tls.h"
#include "service/cluster/job_spec.h"
#include "service/route/route.h"

namespace ringsync::service {
namespace {

using config::Kind;

constexpr std::uint64_t kMinFrameBytes = 4 * 1024;
constexpr std::uint64_t kMinChunkBytes = 4 * 1024;
// Inline data travels in the control link's frames (wire::kMaxFrameBytes, 1 MiB):
// one tensor of this size fits with room for the names beside it.
constexpr std::uint64_t kMaxInlineBytes = 512 * 1024;
constexpr std::uint64_t kChunkAlignment = 64;  // a cache line; a multiple of every element size
constexpr std::uint64_t kMinClientBufferBytes = 4 * 1024;
constexpr std::int64_t kMaxReduceThreads = 1024;
constexpr std::size_t kMaxSocketPath = sizeof(sockaddr_un{}.sun_path) - 1;  // room for the NUL

// "--name ... (from SOURCE)", the suffix of every validation error.
std::string from(const config::Config& cfg, std::string_view name) {
  return " (" + config::flag_name(name) + " from " + cfg.source(name) + ")";
}

Status positive_duration(const config::Config& cfg, std::string_view name, std::chrono::nanoseconds& out) {
  out = cfg.get_duration(name);
  if (out.count() <= 0) {
    return Status::InvalidArgument(std::string(name) + " must be longer than 0, got '" + cfg.get_string(name) +
                                   "'" + from(cfg, name));
  }
  return Status::Ok();
}

Status bytes_in_range(const config::Config& cfg, std::string_view name, std::uint64_t min, std::uint64_t max,
                      std::uint64_t& out) {
  out = cfg.get_bytes(name);
  if (out < min || out > max) {
    return Status::InvalidArgument(std::string(name) + " must be between " + units::format_bytes(min) + " and " +
                                   units::format_bytes(max) + ", got '" + cfg.get_string(name) + "'" +
                                   from(cfg, name));
  }
  return Status::Ok();
}

Status cluster_config_from(const config::Config& cfg, cluster::ClusterConfig& c) {
  const std::string hostfile = cfg.get_string("hostfile");
  const std::string hosts = cfg.get_string("hosts");
  if (!hostfile.empty() && !hosts.empty())
    return Status::InvalidArgument("give the nodes with --hostfile or with --hosts, not both");
  if (!hostfile.empty()) {
    auto nodes = read_hostfile(hostfile);
    if (!nodes.ok()) return Status::InvalidArgument(nodes.status().message() + from(cfg, "hostfile"));
    c.nodes = std::move(nodes).value();
  } else if (!hosts.empty()) {
    auto nodes = parse_host_list(hosts);
    if (!nodes.ok()) return Status::InvalidArgument(nodes.status().message() + from(cfg, "hosts"));
    c.nodes = std::move(nodes).value();
  }
  for (const auto& node : c.nodes)
    if (node.slots != c.nodes.front().slots)
      return Status::InvalidArgument("every node of a job must have the same slots: " + node.host + " has " +
                                     std::to_string(node.slots) + ", " + c.nodes.front().host + " has " +
                                     std::to_string(c.nodes.front().slots));
  const std::int64_t rank = cfg.get_int("node-rank");
  if (rank < 0 || (c.enabled() && rank >= static_cast<std::int64_t>(c.nodes.size())) ||
      (!c.enabled() && rank != 0))
    return Status::InvalidArgument("node-rank " + std::to_string(rank) + " is not in the host list (" +
                                   std::to_string(c.nodes.size()) + " node(s))" + from(cfg, "node-rank"));
  c.node_rank = static_cast<std::uint32_t>(rank);
  c.control_address = cfg.get_string("control-address");
  const auto& env = cfg.environment();
  if (!c.enabled() && env.contains("SLURM_JOB_ID") && env.contains("SLURM_STEP_ID")) {
    c.slurm_job = env.at("SLURM_JOB_ID");
    c.slurm_node = env.contains("SLURM_NODEID") ? env.at("SLURM_NODEID") : "?";
    // Every node's daemon at the same port: the trainers' steps list the nodes
    // by name (SLURM_STEP_NODELIST) with this port (RINGSYNC_CONTROL_PORT).
    if (c.control_address.empty()) c.control_address = "0.0.0.0:" + std::to_string(cluster::kDefaultControlPort);
  }
  c.job_id = cfg.get_string("job-id");
  if (c.job_id.empty() || c.job_id.size() > 256)
    return Status::InvalidArgument("job-id must be 1 to 256 bytes" + from(cfg, "job-id"));
  c.token = cfg.get_string("job-token");
  if (const std::string token_file = cfg.get_string("job-token-file"); !token_file.empty()) {
    if (!c.token.empty())
      return Status::InvalidArgument("give the job token with --job-token or with --job-token-file, not both" +
                                     from(cfg, "job-token-file"));
    auto token = read_job_token_file(token_file);
    if (!token.ok()) return Status::InvalidArgument(token.status().message() + from(cfg, "job-token-file"));
    c.token = std::move(token).value();
  }
  RINGSYNC_RETURN_IF_ERROR(positive_duration(cfg, "join-timeout", c.join_timeout));
  RINGSYNC_RETURN_IF_ERROR(positive_duration(cfg, "heartbeat-interval", c.heartbeat_interval));
  RINGSYNC_RETURN_IF_ERROR(positive_duration(cfg, "peer-timeout", c.peer_timeout));
  if (c.peer_timeout < 2 * c.heartbeat_interval)
    return Status::InvalidArgument("peer-timeout must be at least twice heartbeat-interval, or a healthy "
                                   "peer would be declared lost" + from(cfg, "peer-timeout"));
  c.progress_timeout = cfg.get_duration("progress-timeout");
  c.cycle_time = cfg.get_duration("cycle-time");
  c.fusion_threshold_bytes = cfg.get_bytes("fusion-threshold");
  c.ring.inline_bytes = cfg.get_bytes("inline-bytes");
  {
    auto routes = route::data_routes(cfg.get_string("algorithm"), cfg.get_bytes("direct-max-bytes"),
                                     cfg.get_bytes("rhd-max-bytes"));
    if (!routes.ok()) return Status::InvalidArgument(routes.status().message() + from(cfg, "algorithm"));
    c.ring.routes = *routes;
  }
  c.ring.response_cache = static_cast<std::uint32_t>(cfg.get_int("response-cache"));
  c.ring.chunk_bytes = cfg.get_bytes("ring-chunk-bytes");
  c.ring_window = static_cast<std::uint32_t>(cfg.get_int("ring-window"));
  c.gpu_staging_chunk_bytes = cfg.get_bytes("gpu-staging-chunk");
  if (c.gpu_staging_chunk_bytes != 0)
    RINGSYNC_RETURN_IF_ERROR(
        bytes_in_range(cfg, "gpu-staging-chunk", 64 * 1024, std::uint64_t{1} << 30, c.gpu_staging_chunk_bytes));
  {
    auto verify = integrity::parse_verify_results(cfg.get_string("verify-results"));
    if (!verify.ok()) return Status::InvalidArgument(verify.status().message() + from(cfg, "verify-results"));
    c.ring.verify_results = *verify;
  }
  c.rendezvous = cfg.get_string("rendezvous");
  if (!c.rendezvous.empty() && c.rendezvous.rfind("etcd://", 0) != 0)
    return Status::InvalidArgument("rendezvous must be etcd://HOST:PORT[,HOST:PORT], got '" + c.rendezvous + "'" +
                                   from(cfg, "rendezvous"));
  c.advertise_address = cfg.get_string("advertise-address");
  RINGSYNC_RETURN_IF_ERROR(positive_duration(cfg, "rendezvous-timeout", c.rendezvous_timeout));
  c.rendezvous_lease = cfg.get_duration("rendezvous-lease");
  RINGSYNC_RETURN_IF_ERROR(positive_duration(cfg, "elastic-timeout", c.elastic_timeout));
  c.ucx_transports = cfg.get_string("ucx-transports");
  c.ucx_net_devices = cfg.get_string("ucx-net-devices");
  c.timeline_path = cfg.get_string("timeline");
  const formation::TlsFiles tls{cfg.get_string("tls-cert"), cfg.get_string("tls-key"), cfg.get_string("tls-ca")};
  if (!tls.cert.empty() || !tls.key.empty() || !tls.ca.empty()) {
    auto loaded = formation::ControlTls::load(tls);  // its errors name the flags
    if (!loaded.ok()) return loaded.status();
    c.tls = std::move(loaded).value();
  }
  return Status::Ok();
}

}  // namespace

const std::vector<config::Tunable>& daemon_tunables() {
  static const std::vector<config::Tunable> table = {
      {"socket", Kind::kPath, "", "",
       "Unix socket that trainers connect to. Empty means $XDG_RUNTIME_DIR/ringsync/ringsyncd.sock when "
       "XDG_RUNTIME_DIR is set, else /run/ringsync/ringsyncd.sock as root, else "
       "/tmp/ringsync-<uid>/ringsyncd.sock. Started by srun (a step of a Slurm job): "
       "ringsyncd-slurm-<SLURM_JOB_ID>.sock in that folder, where the job's trainers look first."},
      {"allow-uid", Kind::kString, "", "",
       "Users besides the daemon's own whose trainers may connect (a sidecar running as another user): "
       "comma-separated names or uids. Checked on every connection (SO_PEERCRED); the socket becomes mode 0666."},
      {"allow-gid", Kind::kString, "", "",
       "Groups whose members' trainers may connect: comma-separated names or gids. With one group and no "
       "--allow-uid the socket gets that group and mode 0660."},
      {"metrics-address", Kind::kAddress, "127.0.0.1:9400", "",
       "Where the Prometheus /metrics endpoint listens; \"off\" turns it off."},
      {"collective-timeout", Kind::kDuration, "300s", "seconds",
       "A collective not completed by all local ranks in this time fails with a timeout error."},
      {"stall-warning", Kind::kDuration, "60s", "seconds",
       "The stall inspector reports the ranks and tensors still missing after this long."},
      {"max-frame-bytes", Kind::kBytes, "64KiB", "bytes",
       "Largest control message a client may send; larger frames are rejected.",
       units::format_bytes(kMinFrameBytes), units::format_bytes(wire::kMaxFrameBytes)},
      {"max-client-buffer-bytes", Kind::kBytes, "64GiB", "bytes",
       "Total shared memory one client may allocate for its buffers.",
       units::format_bytes(kMinClientBufferBytes), ""},
      {"reduce-threads", Kind::kInt, "0", "threads", "Threads that sum local buffers; 0 means one per core.",
       "0", std::to_string(kMaxReduceThreads)},
      {"reduce-chunk-bytes", Kind::kBytes, "1MiB", "bytes",
       "Granularity of the work split across reduce threads (a multiple of 64).",
       units::format_bytes(kMinChunkBytes), ""},
      {"ready-file", Kind::kPath, "", "",
       "When set, written once the daemon is listening, with lines socket=PATH and metrics=HOST:PORT."},
      {"log-level", Kind::kString, "info", "", "Most verbose log level written: error, warn, info, debug, trace."},
      {"log-subsys", Kind::kString, "all", "",
       "Subsystems that log: a comma list, all, or ^name to exclude one (e.g. ^ucx,^shm)."},
      {"handshake-timeout", Kind::kDuration, "10s", "seconds",
       "A connection that has not said hello by then is closed."},
      {"busy-poll", Kind::kDuration, "100us", "seconds",
       "After a small collective's events (256KiB or less) the control loop, and after its last task "
       "the ring's thread, poll instead of sleeping for this long, which saves a wake-up per step; "
       "0 turns it off.", "0", "10ms"},
      {"control-cpus", Kind::kString, "", "",
       "CPUs the control thread runs on (it busy-polls trainers and peers after small collectives), "
       "as taskset -c writes them: 3 or 2-3,6. A core no trainer uses answers small collectives "
       "fastest. The daemon's other threads keep every CPU it was given. Empty: wherever the "
       "scheduler puts it."},
      {"client-channel", Kind::kString, "shm", "",
       "How trainers' frames travel: shm (a shared-memory ring each way, the socket only wakes a "
       "sleeping side) or socket (every frame on the Unix socket)."},
      {"hostfile", Kind::kPath, "", "",
       "Multi-node job: one line per node, 'host[:port] slots=L', in node-rank order. Without "
       "--hostfile or --hosts the daemon serves this node alone."},
      {"hosts", Kind::kString, "", "", "Multi-node job as a list instead of a file: host:slots,host:slots."},
      {"node-rank", Kind::kInt, "0", "rank", "This node's place (line) in the host list."},
      {"control-address", Kind::kString, "", "",
       "HOST:PORT the control plane listens on; default this node's host list entry (port 29517 "
       "when the entry has none); started by srun, 0.0.0.0:29517."},
      {"job-id", Kind::kString, "default", "",
       "The pre-configured multi-node job's id: every daemon of the job and its trainers (RINGSYNC_JOB_ID) "
       "use the same."},
      {"job-token", Kind::kString, "", "",
       "The pre-configured job's shared key: daemons of the job prove to each other that they hold it "
       "(challenge-response; the key itself never travels), and peers that cannot are refused. Prefer "
       "--job-token-file or the environment: a flag shows in /proc/*/cmdline. Jobs that trainers describe bring "
       "their own (RINGSYNC_JOB_TOKEN)."},
      {"job-token-file", Kind::kPath, "", "",
       "A file holding the pre-configured job's key (--job-token), one line, readable by its owner only "
       "(chmod 600)."},
      {"tls-cert", Kind::kPath, "", "",
       "Mutual TLS (1.3) on every control connection between daemons: this node's certificate (PEM), signed "
       "by the CA of --tls-ca. Give --tls-cert, --tls-key and --tls-ca together, on every node; a peer "
       "without a certificate the CA signed is refused. The UCX data plane stays unencrypted (docs/security.md)."},
      {"tls-key", Kind::kPath, "", "", "The private key of --tls-cert (PEM, unencrypted), readable by its owner only "
                                     "(chmod 600)."},
      {"tls-ca", Kind::kPath, "", "",
       "The CA certificate(s) (PEM) that every node's --tls-cert must chain to: a ringsync-only CA, since "
       "any certificate it signed is accepted as a node."},
      {"rendezvous", Kind::kString, "", "",
       "Rendezvous store for multi-node jobs whose trainers give no node list (RINGSYNC_NODES): "
       "etcd://HOST:PORT[,HOST:PORT]. Trainers may name their own (RINGSYNC_RENDEZVOUS)."},
      {"serve-rendezvous", Kind::kString, "", "",
       "HOST:PORT where this daemon serves a rendezvous store itself, for clusters without etcd (the part of "
       "etcd's v3 API ringsync uses, in this daemon's memory): the jobs name it as etcd://HOST:PORT. Run it "
       "where it outlives the jobs (a head node); its keys end with this daemon."},
      {"rendezvous-timeout", Kind::kDuration, "5s", "seconds",
       "How long one request to the rendezvous store may take before it counts as failed."},
      {"rendezvous-lease", Kind::kDuration, "10s", "seconds",
       "How long a node's registration in the rendezvous store outlives its daemon (a crashed daemon's "
       "place frees after this).", "1s", ""},
      {"elastic-timeout", Kind::kDuration, "60s", "seconds",
       "An elastic job (RINGSYNC_MIN_NODES) with fewer nodes than its minimum waits this long for more, then "
       "fails with a clear error."},
      {"advertise-address", Kind::kString, "", "",
       "HOST:PORT the other nodes reach this daemon's control port at, as registered in the rendezvous; "
       "default --control-address (which must then name a host, not 0.0.0.0)."},
      {"rank-liveness-timeout", Kind::kDuration, "30s", "seconds",
       "A rank whose process is stopped (SIGSTOP, a debugger), or that stops answering while it waits for "
       "a collective, this long fails its job on every node; 0 turns the check off."},
      {"max-jobs", Kind::kInt, "64", "jobs", "Jobs served at once; a hello for one more is refused.", "1", "65536"},
      {"max-job-ranks", Kind::kInt, "4096", "ranks", "Ranks of one job on this node (its local size).", "1", "4096"},
      {"max-job-buffer-bytes", Kind::kBytes, "256GiB", "bytes",
       "Shared memory all ranks of one job on this node may allocate together.",
       units::format_bytes(kMinClientBufferBytes), ""},
      {"max-kept-state-bytes", Kind::kBytes, "16GiB", "bytes",
       "Committed states trainers keep in this daemon (ringsync.elastic), all jobs together; 0 keeps none."},
      {"kept-state-linger", Kind::kDuration, "10m", "seconds",
       "How long a job's kept states stay after its last rank left this node (a restarted trainer resumes "
       "from them)."},
      {"link-rate", Kind::kString, "", "rate",
       "The nodes' network link rate (e.g. 100Gbit), exported as ringsync_link_rate_bytes_per_second for "
       "the alerts that compare bandwidth with it (BusBandwidthLow, SlowLink); empty: not set."},
      {"job-metrics-linger", Kind::kDuration, "5m", "seconds",
       "How long the job_id-labelled series of a job that ended here stay in /metrics."},
      {"join-timeout", Kind::kDuration, "60s", "seconds",
       "How long forming the ring waits for every node; then waiting collectives fail naming the "
       "missing nodes."},
      {"heartbeat-interval", Kind::kDuration, "500ms", "seconds", "Heartbeats between daemons."},
      {"peer-timeout", Kind::kDuration, "5s", "seconds",
       "A peer daemon silent for this long is lost: the job's collectives fail with 'peer lost'."},
      {"progress-timeout", Kind::kDuration, "20s", "seconds",
       "An operation between the nodes that moves no data-plane bytes for this long (or a local phase of it, "
       "the gather or the copy-out, that takes this long) fails on every node, naming the node that waits and "
       "the peer and link it waits for, and the ring forms again; a slow link that moves bytes is never cut. "
       "0 leaves only --collective-timeout."},
      {"cycle-time", Kind::kDuration, "1ms", "seconds",
       "Negotiation cycle: tensors that become ready within one cycle are planned (and fused) together.", "0", "1s"},
      {"fusion-threshold", Kind::kBytes, "128MiB", "bytes",
       "Ready allreduces of one dtype and op are fused into one ring operation up to this size; 0 "
       "disables fusion."},
      {"inline-bytes", Kind::kBytes, "256KiB", "bytes",
       "Allreduces up to this size skip the ring: up to x 2/(N(N-1)) the nodes exchange their local "
       "reductions directly, up to x 2/N node 0 sends the result with the plan; 0 always runs the "
       "ring. The same on every node.", "0", units::format_bytes(kMaxInlineBytes)},
      {"algorithm", Kind::kString, "auto", "",
       "How allreduces move between nodes: auto (the direct reduce-scatter and allgather up to "
       "--direct-max-bytes; up to --rhd-max-bytes recursive halving-doubling where the node count is a "
       "power of two, the direct algorithm elsewhere; the pipelined ring above), ring, rhd "
       "(halving-doubling at every size and node count) or direct (at every size). The same on every node."},
      {"direct-max-bytes", Kind::kBytes, "0", "bytes",
       "With --algorithm auto: the largest allreduce (after fusion) that goes by the direct algorithm "
       "(2 steps at any node count, each node to every other at once); 0: none."},
      {"rhd-max-bytes", Kind::kBytes, "1MiB", "bytes",
       "With --algorithm auto: the largest allreduce (after fusion) that goes by halving-doubling "
       "(fewer steps: 2 log2 N instead of 2(N-1)), or by the direct algorithm where the node count is not "
       "a power of two; larger ones take the ring."},
      {"response-cache", Kind::kInt, "1024", "tensors",
       "Response cache capacity: repeated tensors are negotiated as one bit; 0 disables it.", "0", "1048576"},
      {"ring-chunk-bytes", Kind::kBytes, "512KiB", "bytes",
       "Largest message of the ring between daemons; over tcp also UCX's segment (half this and 4KiB, "
       "up to 4MiB-64), the size of each of UCX's buffers.",
       "4KiB", "1GiB"},
      {"ring-window", Kind::kInt, "4", "chunks", "Ring chunks in flight each way.", "1", "64"},
      {"gpu-staging-chunk", Kind::kBytes, "4MiB", "bytes",
       "An allreduce of GPU buffers (1 MiB or more) across nodes goes through host memory in copies of "
       "up to this size that overlap the ring; 0 copies whole buffers before and after the ring instead."},
      {"verify-results", Kind::kString, "off", "",
       "End-to-end check of results that must match on every node (allreduce, broadcast, allgather over "
       "the ring): off; sample (16 windows of 4 KiB of each: about 0.5% at 64 MiB); all (every byte). "
       "A difference fails the collective on every rank naming the nodes (docs/security.md). The same on "
       "every node."},
      {"ucx-transports", Kind::kString, "", "",
       "UCX transports between daemons (UCX_TLS). Empty: UCX picks the best it finds on each link "
       "(rc/dc/ud verbs on InfiniBand or RoCE, tcp otherwise, shared memory between daemons on one "
       "machine); the log and ringsync_peer_transports_info say what it chose. tcp,self pins TCP "
       "(ringsync launch does, for simulated nodes); rc,self pins RDMA."},
      {"ucx-net-devices", Kind::kString, "", "", "UCX network devices (UCX_NET_DEVICES); empty leaves UCX's choice."},
      {"timeline", Kind::kPath, "", "",
       "When set, a Chrome-trace JSON timeline of every collective's phases is written to this file; "
       "{node} in the path is replaced by the node rank."},
  };
  return table;
}

std::map<std::string, std::string> daemon_environment() {
  return config::environment_snapshot({"XDG_RUNTIME_DIR", "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_NODEID"});
}

Result<DaemonConfig> daemon_config_from(const config::Config& cfg) {
  DaemonConfig d;

  // Started by srun (a step of a Slurm job) without a job of its own: the
  // job's daemon on this node, at a socket the job's trainers look for.
  const auto& env = cfg.environment();
  const bool slurm_step = env.contains("SLURM_JOB_ID") && env.contains("SLURM_STEP_ID") &&
                          cfg.get_string("hostfile").empty() && cfg.get_string("hosts").empty();
  auto access = local::AccessPolicy::parse(::getuid(), cfg.get_string("allow-uid"), cfg.get_string("allow-gid"));
  if (!access.ok()) return access.status();
  d.access = std::move(access).value();
  d.socket_path = cfg.get_string("socket");
  if (d.socket_path.empty() && slurm_step) d.socket_path = slurm_socket_path(env, ::getuid());
  if (d.socket_path.empty()) d.socket_path = default_socket_path(env, ::getuid());
  if (d.socket_path.size() > kMaxSocketPath) {
    return Status::InvalidArgument("socket path '" + d.socket_path + "' is " + std::to_string(d.socket_path.size()) +
                                   " bytes; a Unix socket path must be at most " + std::to_string(kMaxSocketPath) +
                                   ": choose a shorter --socket" + from(cfg, "socket"));
  }

  const auto metrics = cfg.get_address("metrics-address");
  d.metrics_address = metrics ? metrics->to_string() : "";

  RINGSYNC_RETURN_IF_ERROR(positive_duration(cfg, "collective-timeout", d.collective_timeout));
  RINGSYNC_RETURN_IF_ERROR(positive_duration(cfg, "stall-warning", d.stall_warning));
  RINGSYNC_RETURN_IF_ERROR(positive_duration(cfg, "handshake-timeout", d.client_handshake_timeout));
  d.busy_poll = cfg.get_duration("busy-poll");
  d.cluster.busy_poll = d.busy_poll;
  const std::string channel = cfg.get_string("client-channel");
  if (channel != "shm" && channel != "socket")
    return Status::InvalidArgument("client-channel must be shm or socket, got '" + channel + "'" +
                                   from(cfg, "client-channel"));
  d.shm_channel = channel == "shm";
  if (const std::string cpus = cfg.get_string("control-cpus"); !cpus.empty()) {
    auto parsed = parse_cpu_list(cpus);
    if (!parsed.ok())
      return Status::InvalidArgument("control-cpus must be a CPU list such as 3 or 2-3,6: " +
                                     parsed.status().message() + from(cfg, "control-cpus"));
    d.control_cpus = std::move(parsed).value();
  }

  d.max_frame_bytes = cfg.get_bytes("max-frame-bytes");
  d.max_client_buffer_bytes = cfg.get_bytes("max-client-buffer-bytes");
  d.reduce_chunk_bytes = cfg.get_bytes("reduce-chunk-bytes");
  if (d.reduce_chunk_bytes % kChunkAlignment != 0) {
    return Status::InvalidArgument("reduce-chunk-bytes must be a multiple of 64 bytes so that no element or cache "
                                   "line is split between threads, got '" + cfg.get_string("reduce-chunk-bytes") +
                                   "'" + from(cfg, "reduce-chunk-bytes"));
  }

  const std::int64_t threads = cfg.get_int("reduce-threads");
  d.reduce_threads = threads > 0 ? static_cast<int>(threads)
                                 : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));

  d.ready_file = cfg.get_string("ready-file");

  auto level = log::parse_level(cfg.get_string("log-level"));
  if (!level.ok()) return Status::InvalidArgument(level.status().message() + from(cfg, "log-level"));
  d.log_level = std::string(log::level_name(level.value()));
  auto filter = log::SubsystemFilter::parse(cfg.get_string("log-subsys"));
  if (!filter.ok()) return Status::InvalidArgument(filter.status().message() + from(cfg, "log-subsys"));
  d.log_subsys = filter.value().to_string();

  d.rank_liveness_timeout = cfg.get_duration("rank-liveness-timeout");
  d.max_jobs = static_cast<std::size_t>(cfg.get_int("max-jobs"));
  d.max_job_ranks = static_cast<std::uint32_t>(cfg.get_int("max-job-ranks"));
  d.max_job_buffer_bytes = cfg.get_bytes("max-job-buffer-bytes");
  d.job_metrics_linger = cfg.get_duration("job-metrics-linger");
  d.max_kept_state_bytes = cfg.get_bytes("max-kept-state-bytes");
  d.serve_rendezvous = cfg.get_string("serve-rendezvous");
  if (const std::string rate = cfg.get_string("link-rate"); !rate.empty()) {
    auto parsed = units::parse_rate(rate);
    if (!parsed.ok() || *parsed <= 0)
      return Status::InvalidArgument("link-rate: " +
                                     (parsed.ok() ? std::string("must be above 0") : parsed.status().message()) +
                                     from(cfg, "link-rate"));
    d.link_rate_bytes_per_second = *parsed;
  }
  d.kept_state_linger = cfg.get_duration("kept-state-linger");

  RINGSYNC_RETURN_IF_ERROR(cluster_config_from(cfg, d.cluster));
  return d;
}

}  // namespace ringsync::service
