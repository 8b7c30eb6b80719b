#include "cli/top/options.h"

#include "cli/node_daemons.h"
#include "cli/options.h"
#include "common/units.h"

namespace ringsync::cli::top {

const char* const kHelp =
    "usage: ringsync top [--metrics HOST:PORT[,HOST:PORT...]] [--launch-dir DIR] [--job-id ID]\n"
    "                    [--interval DURATION] [--timeout DURATION] [--once] [HOST:PORT...]\n"
    "\n"
    "A live view of a job from its daemons' /metrics: per daemon, its ring (nodes, epoch)\n"
    "per job, clients and collectives/s; per link, bytes/s both ways and the send-busy\n"
    "bandwidth, the slowest link marked; per local rank, how late it submits (mean and p90\n"
    "over the interval, and how often it was last), the latest marked; stalled tensors;\n"
    "errors new in the interval. A daemon that does not answer is shown as DOWN with why.\n"
    "\n"
    "options:\n"
    "  --metrics LIST       daemons' metrics addresses, comma-separated: HOST:PORT, [IPV6]:PORT\n"
    "                       or http://HOST:PORT[/PATH] (default path /metrics); repeatable, and\n"
    "                       addresses may also be given without the option\n"
    "  --launch-dir DIR     the daemons a 'ringsync launch' started: its --log-dir or run\n"
    "                       directory, where it lists them in the file metrics-addresses.\n"
    "                       With no address and no --launch-dir, the newest launch of yours\n"
    "                       on this machine is watched\n"
    "  --job-id ID          only this job's rings, links and ranks\n"
    "  --interval DURATION  between refreshes, and between the two scrapes of --once\n"
    "                       (default 2s; 0.5 or 500ms for half a second)\n"
    "  --timeout DURATION   how long one daemon may take to answer (default 2s)\n"
    "  --once               print one plain snapshot (no escape codes) from two scrapes\n"
    "                       --interval apart, and exit: 0, or 1 when no daemon answered\n"
    "  --help               this help\n"
    "\n"
    "Without --once the screen is redrawn in place every --interval (ANSI escapes when\n"
    "stdout is a terminal, frames one after the other when it is not) until Ctrl-C or\n"
    "SIGTERM, which exit 0. Exit 2: bad arguments.\n";

namespace {

Result<std::chrono::nanoseconds> positive_duration(const std::string& name, const std::string& text) {
  auto d = units::parse_duration(text);
  if (!d.ok() || d->count() <= 0 || *d > std::chrono::hours(1))
    return Status::InvalidArgument(name + " '" + text + "' is not a duration from 1ns to 1h (" +
                                   std::string(units::kDurationForm) + ")");
  return *d;
}

Status add_targets(std::vector<Target>& to, const Result<std::vector<Target>>& from) {
  if (!from.ok()) return from.status();
  to.insert(to.end(), from->begin(), from->end());
  return Status::Ok();
}

}  // namespace

Result<Options> parse_options(const std::vector<std::string>& args) {
  Options o;
  std::vector<std::string> launch_dirs;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      o.help = true;
      return o;
    }
    if (arg == "--once") {
      o.once = true;
      continue;
    }
    if (!arg.starts_with("--")) {
      RINGSYNC_RETURN_IF_ERROR(add_targets(o.targets, parse_targets(arg)));
      continue;
    }
    const NamedArgument split = split_argument(arg);
    const std::string& name = split.name;
    const bool has_value = split.value.has_value();
    std::string value = split.value.value_or("");
    if (name != "--metrics" && name != "--launch-dir" && name != "--job-id" && name != "--interval" &&
        name != "--timeout")
      return Status::InvalidArgument("unknown option '" + name + "' (see ringsync top --help)");
    if (!has_value) {
      if (i + 1 >= args.size()) return Status::InvalidArgument(name + " needs a value");
      value = args[++i];
    }
    if (name == "--metrics") {
      RINGSYNC_RETURN_IF_ERROR(add_targets(o.targets, parse_targets(value)));
    } else if (name == "--launch-dir") {
      if (value.empty()) return Status::InvalidArgument("--launch-dir needs a directory");
      launch_dirs.push_back(value);
    } else if (name == "--job-id") {
      if (value.empty()) return Status::InvalidArgument("--job-id needs a job id");
      o.job_id = value;
    } else {
      auto d = positive_duration(name, value);
      if (!d.ok()) return d.status();
      (name == "--interval" ? o.interval : o.timeout) = *d;
    }
  }
  for (const auto& dir : launch_dirs) RINGSYNC_RETURN_IF_ERROR(add_targets(o.targets, launch_targets(dir)));
  if (o.targets.empty()) {
    auto newest = newest_launch_dir();
    if (!newest.ok()) return newest.status();
    RINGSYNC_RETURN_IF_ERROR(add_targets(o.targets, launch_targets(*newest)));
    o.origin = "the newest ringsync launch: " + (*newest / kMetricsAddressesFile).string();
  }
  return o;
}

}  // namespace ringsync::cli::top
