#include "cli/launch_options.h"

#include "cli/options.h"
#include "common/units.h"

namespace ringsync::cli {

const char* const kLaunchHelp =
    "usage: ringsync launch --nodes N --slots L [--job-id ID] [--daemon-arg ARG]...\n"
    "                       [--log-dir DIR] [--timeout DURATION] [--stop-grace DURATION]\n"
    "                       -- CMD [ARGS...]\n"
    "       ringsync launch --daemon SOCKET@HOST:PORT [--daemon ...] --slots L [--job-id ID]\n"
    "                       [--timeout DURATION] [--stop-grace DURATION] -- CMD [ARGS...]\n"
    "\n"
    "Runs a multi-node job on this machine: N ringsyncd daemons, each one simulated\n"
    "node, and L copies of CMD per node (N*L trainer ranks). With --daemon, no daemon\n"
    "is started: the job runs on daemons that run already (started with\n"
    "--control-address and no job), one --daemon per node in node order, and the\n"
    "ranks describe the job to them (below).\n"
    "\n"
    "options:\n"
    "  --nodes N            daemons (simulated nodes), 1 to 64\n"
    "  --daemon SOCKET@HOST:PORT  a running ringsyncd: its socket and its --control-address;\n"
    "                       repeat it for every node, node 0 first (then --nodes may be left out)\n"
    "  --slots L            trainer processes per node, 1 to 4096\n"
    "  --job-id ID          the job's id, given to the daemons and trainers (default: default)\n"
    "  --daemon-arg ARG     one more argument for every ringsyncd; repeat it for more, e.g.\n"
    "                       --daemon-arg --log-level --daemon-arg debug\n"
    "  --log-dir DIR        keep the daemons' logs in DIR (node-I.log, overwritten; DIR is\n"
    "                       created); by default they live in the private run directory and\n"
    "                       go away with it\n"
    "  --timeout DURATION   stop everything and exit 124 when the job runs longer\n"
    "                       (e.g. 90s, 10m, 1h30m; default: no limit)\n"
    "  --stop-grace DURATION  between SIGTERM and SIGKILL when ranks are stopped (default 10s)\n"
    "  --help               this help\n"
    "\n"
    "The daemons. A private temporary directory holds a hostfile with one line\n"
    "'127.0.0.1:PORT slots=L' per node (free TCP ports) and, for node I, the socket\n"
    "node-I.sock, the ready file node-I.ready and the log node-I.log. Daemon I runs as\n"
    "  ringsyncd --node-rank I --hostfile FILE --socket node-I.sock\n"
    "            --metrics-address 127.0.0.1:0 --ready-file node-I.ready --job-id ID [ARG...]\n"
    "with a fresh random job token (in its environment as RINGSYNC_JOB_TOKEN, not on the\n"
    "command line). ringsyncd is taken from the directory of this ringsync program, or\n"
    "from $RINGSYNC_DAEMON. If a daemon fails to start (a port taken meanwhile), all\n"
    "are started once more on new ports; a second failure prints the end of its log.\n"
    "\n"
    "The trainers. Once every daemon is ready, a line says where each daemon serves\n"
    "/metrics (the file metrics-addresses in the run directory and in --log-dir lists\n"
    "them for 'ringsync top --launch-dir DIR'; 'ringsync top' alone watches the newest\n"
    "launch), and rank R = I*L + J (node I, local rank J) starts as CMD ARGS... with\n"
    "  RINGSYNC_SOCKET (node I's socket)  RINGSYNC_JOB_ID   RINGSYNC_RANK=R\n"
    "  RINGSYNC_SIZE=N*L   RINGSYNC_LOCAL_RANK=J   RINGSYNC_LOCAL_SIZE=L\n"
    "  RINGSYNC_NODE_RANK=I   RINGSYNC_NUM_NODES=N\n"
    "and torch.distributed's (as torchrun sets them, for init_process_group's env://)\n"
    "  RANK=R   WORLD_SIZE=N*L   LOCAL_RANK=J   LOCAL_WORLD_SIZE=L\n"
    "  MASTER_ADDR=127.0.0.1   MASTER_PORT (a port free when the job starts)\n"
    "and, with --daemon, RINGSYNC_NODES (every daemon's HOST:PORT, by node) and a fresh\n"
    "random RINGSYNC_JOB_TOKEN: the daemons form this job's ring from them.\n"
    "stdin from /dev/null, in a process group of its own. Every line a rank writes is\n"
    "printed with the prefix '[rank R] ', its stdout on stdout and its stderr on stderr;\n"
    "a line longer than 64 KiB is printed in pieces.\n"
    "\n"
    "The end. When every rank has exited 0, the daemons are stopped and the exit\n"
    "status is 0. Otherwise the first rank to fail decides it (its exit status, or 128+S\n"
    "when signal S killed it); the other ranks get SIGTERM and, after the grace period,\n"
    "SIGKILL (their whole process groups); then the daemons get SIGTERM. A daemon that\n"
    "dies during the job is reported with the end of its log and fails the job (1).\n"
    "SIGINT, SIGTERM or SIGHUP stop everything the same way (exit 128+signal; a second\n"
    "one skips the grace period), and so does a closed stdout (ringsync launch ... | head:\n"
    "141, as SIGPIPE). --timeout exits 124. Exit 2: bad arguments; 127: CMD\n"
    "not found or not executable (checked before anything starts). If the launcher itself\n"
    "is killed, the kernel sends its ranks SIGKILL and its daemons SIGTERM.\n";

namespace {

Result<int> int_in_range(const std::string& name, const std::string& text, int max,
                         const std::string& what) {
  auto value = units::parse_int(text);
  if (!value.ok() || *value < 1 || *value > max)
    return Status::InvalidArgument(name + " must be " + what + ", 1 to " + std::to_string(max) +
                                   " (got '" + text + "')");
  return static_cast<int>(*value);
}

Result<std::chrono::nanoseconds> duration(const std::string& name, const std::string& text) {
  auto value = units::parse_duration(text);
  if (!value.ok())
    return Status::InvalidArgument(name + " '" + text + "': " + value.status().message() + " (" +
                                   std::string(units::kDurationForm) + ")");
  return *value;
}

}  // namespace

bool wants_launch_help(const std::vector<std::string>& args) {
  for (const auto& a : args) {
    if (a == "--") return false;
    if (a == "--help" || a == "-h") return true;
  }
  return false;
}

Result<LaunchOptions> parse_launch_options(const std::vector<std::string>& args) {
  LaunchOptions o;
  bool saw_separator = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      saw_separator = true;
      o.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    if (arg.rfind("--", 0) != 0)
      return Status::InvalidArgument("'" + arg + "' is not an option; put the trainer command after "
                                     "'--': ringsync launch --nodes N --slots L -- CMD ARGS...");
    const NamedArgument split = split_argument(arg);
    const std::string& name = split.name;
    const bool has_value = split.value.has_value();
    std::string value = split.value.value_or("");
    static const char* const kKnown[] = {"--nodes",   "--slots",   "--job-id",     "--daemon-arg",
                                         "--log-dir", "--timeout", "--stop-grace", "--daemon"};
    bool known = false;
    for (const char* k : kKnown) known = known || name == k;
    if (!known)
      return Status::InvalidArgument("unknown option '" + name + "' (see ringsync launch --help)");
    if (!has_value) {
      if (i + 1 >= args.size()) return Status::InvalidArgument(name + " needs a value");
      value = args[++i];
    }
    if (name == "--nodes") {
      auto n = int_in_range(name, value, kMaxNodes, "the number of nodes (daemons)");
      if (!n.ok()) return n.status();
      o.nodes = *n;
    } else if (name == "--slots") {
      auto n = int_in_range(name, value, kMaxSlots, "the number of trainer processes per node");
      if (!n.ok()) return n.status();
      o.slots = *n;
    } else if (name == "--job-id") {
      if (value.empty() || value.size() > 256)
        return Status::InvalidArgument("--job-id must be 1 to 256 bytes");
      o.job_id = value;
    } else if (name == "--daemon") {
      const auto at = value.rfind('@');
      if (at == std::string::npos || at == 0 || at + 1 == value.size() || value.find(':', at) == std::string::npos)
        return Status::InvalidArgument("--daemon '" + value +
                                       "' is not SOCKET@HOST:PORT (the daemon's socket, then its --control-address)");
      o.attach.push_back({value.substr(0, at), value.substr(at + 1)});
    } else if (name == "--daemon-arg") {
      o.daemon_args.push_back(value);
    } else if (name == "--log-dir") {
      if (value.empty()) return Status::InvalidArgument("--log-dir needs a directory");
      o.log_dir = value;
    } else if (name == "--timeout") {
      auto d = duration(name, value);
      if (!d.ok()) return d.status();
      if (d->count() <= 0) return Status::InvalidArgument("--timeout must be longer than 0");
      o.timeout = *d;
    } else {
      auto d = duration(name, value);
      if (!d.ok()) return d.status();
      o.stop_grace = *d;
    }
  }
  if (!o.attach.empty()) {
    if (o.nodes != 0 && o.nodes != static_cast<int>(o.attach.size()))
      return Status::InvalidArgument("--nodes " + std::to_string(o.nodes) + " but " + std::to_string(o.attach.size()) +
                                     " --daemon: give one --daemon per node, or leave --nodes out");
    if (!o.daemon_args.empty() || !o.log_dir.empty())
      return Status::InvalidArgument("--daemon-arg and --log-dir are for the daemons ringsync launch starts; "
                                     "with --daemon they run already");
    o.nodes = static_cast<int>(o.attach.size());
  }
  if (o.nodes == 0) return Status::InvalidArgument("give --nodes N: the number of nodes (daemons), 1 to 64");
  if (o.slots == 0)
    return Status::InvalidArgument("give --slots L: trainer processes per node, 1 to 4096");
  if (!saw_separator)
    return Status::InvalidArgument("missing '--' and the trainer command: ringsync launch --nodes " +
                                   std::to_string(o.nodes) + " --slots " + std::to_string(o.slots) +
                                   " -- CMD ARGS...");
  if (o.command.empty())
    return Status::InvalidArgument("no trainer command after '--'");
  return o;
}

}  // namespace ringsync::cli
