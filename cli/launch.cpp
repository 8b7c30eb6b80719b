// ringsync launch: N simulated nodes on this machine, one daemon each, L trainer
// ranks per node.
#include "cli/launch.h"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "cli/find_program.h"
#include "cli/node_daemons.h"
#include "cli/stop_signals.h"
#include "cli/temp_dir.h"
#include "cli/trainer_ranks.h"

namespace ringsync::cli {
namespace {

namespace fs = std::filesystem;

// $RINGSYNC_DAEMON, else the ringsyncd next to this program.
std::string daemon_program(const std::string& self) {
  if (const char* env = ::getenv("RINGSYNC_DAEMON"); env && *env) return env;
  return (fs::path(self).parent_path() / "ringsyncd").string();
}

// `records`: where the daemons' metrics addresses are, for ringsync top.
std::string summary(const NodeDaemons& daemons, const LaunchOptions& o, const fs::path& records) {
  std::string line = std::to_string(o.nodes) + " node(s) x " + std::to_string(o.slots) + " slot(s) = " +
                     std::to_string(o.nodes * o.slots) + " rank(s) of job '" + o.job_id + "'; metrics:";
  bool any = false;
  for (int i = 0; i < daemons.size(); ++i) {
    line += (i ? ", node " : " node ") + std::to_string(i) + " ";
    line += daemons.metrics(i).empty() ? "off" : "http://" + daemons.metrics(i) + "/metrics";
    any = any || !daemons.metrics(i).empty();
  }
  if (any) line += "; watch them: ringsync top --launch-dir " + records.string();
  return line;
}

// The trainers of the plan; the caller says where the daemons are.
RanksSpec ranks_of(const LaunchPlan& plan, const std::string& program) {
  const LaunchOptions& o = plan.options;
  RanksSpec ranks;
  ranks.command = o.command;
  ranks.command.front() = program;
  ranks.nodes = o.nodes;
  ranks.slots = o.slots;
  ranks.job_id = o.job_id;
  ranks.timeout = o.timeout;
  ranks.stop_grace = o.stop_grace;
  ranks.raw_stdout_rank = plan.raw_stdout_rank;
  ranks.tool = plan.tool;
  return ranks;
}

// The job on daemons that run already (--daemon): nothing to start or stop.
int run_attached(const LaunchPlan& plan, const std::string& program) {
  const LaunchOptions& o = plan.options;
  for (std::size_t i = 0; i < o.attach.size(); ++i)
    if (::access(o.attach[i].socket.c_str(), F_OK) != 0) {
      say(plan.tool, "node " + std::to_string(i) + ": no ringsyncd socket at " + o.attach[i].socket +
                         "; start the daemon first (ringsyncd --socket " + o.attach[i].socket + " --control-address " +
                         o.attach[i].control + ")");
      return 1;
    }
  StopSignals signals;
  RanksSpec ranks = ranks_of(plan, program);
  for (const auto& a : o.attach) {
    ranks.sockets.push_back(a.socket);
    ranks.control_addresses.push_back(a.control);
  }
  ranks.job_token = random_job_token();
  std::string line = std::to_string(o.nodes) + " node(s) x " + std::to_string(o.slots) + " slot(s) = " +
                     std::to_string(o.nodes * o.slots) + " rank(s) of job '" + o.job_id + "' on running daemons:";
  for (std::size_t i = 0; i < o.attach.size(); ++i)
    line += (i ? ", node " : " node ") + std::to_string(i) + " " + o.attach[i].control;
  say(plan.tool, line);
  return run_trainer_ranks(ranks, nullptr, signals);
}

}  // namespace

int run_launch(const LaunchPlan& plan, const std::string& self, const LaunchHooks& hooks) {
  const LaunchOptions& o = plan.options;
  auto program = find_program(o.command.front());
  if (!program.ok()) {
    say(plan.tool, program.status().message());
    return 127;
  }
  if (!o.attach.empty()) return run_attached(plan, *program);
  const std::string daemon = daemon_program(self);
  if (::access(daemon.c_str(), X_OK) != 0) {
    say(plan.tool, "no ringsyncd at " + daemon +
                       "; it is looked for next to this ringsync program, or set RINGSYNC_DAEMON");
    return 1;
  }
  TempDir run_dir("ringsync-launch");
  if (run_dir.path().empty()) {
    say(plan.tool, "cannot create a temporary directory in " + fs::temp_directory_path().string());
    return 1;
  }
  fs::path log_dir = o.log_dir.empty() ? run_dir.path() : fs::path(o.log_dir);
  std::error_code ec;
  fs::create_directories(log_dir, ec);
  if (ec) {
    say(plan.tool, "cannot create --log-dir " + log_dir.string() + ": " + ec.message());
    return 1;
  }

  StopSignals signals;
  DaemonSpec spec;
  spec.nodes = o.nodes;
  spec.slots = o.slots;
  spec.job_id = o.job_id;
  spec.extra_args = plan.default_daemon_args;
  spec.extra_args.insert(spec.extra_args.end(), o.daemon_args.begin(), o.daemon_args.end());
  spec.program = daemon;
  spec.run_dir = run_dir.path();
  spec.log_dir = log_dir;
  auto daemons = NodeDaemons::start(spec, [&] {
    signals.drain();
    return signals.first_stop_signal() != 0;
  });
  if (!daemons.ok()) {
    if (daemons.status().code() == StatusCode::kClosed && signals.first_stop_signal() != 0) {
      say(plan.tool, std::string("received ") + signal_name(signals.first_stop_signal()) +
                         " while the daemons started; stopped them");
      return 128 + signals.first_stop_signal();
    }
    say(plan.tool, daemons.status().message());
    return 1;
  }
  if (hooks.daemons_ready)
    hooks.daemons_ready(*daemons);
  else
    say(plan.tool, summary(*daemons, o, log_dir));

  RanksSpec ranks = ranks_of(plan, *program);
  for (int i = 0; i < daemons->size(); ++i) ranks.sockets.push_back(daemons->socket(i));
  int status = run_trainer_ranks(ranks, &*daemons, signals);
  if (hooks.ranks_done) hooks.ranks_done(*daemons, status);

  const auto unclean = daemons->stop(std::chrono::seconds(20));
  for (const auto& u : unclean)
    say(plan.tool, "node " + std::to_string(u.node) + "'s ringsyncd did not shut down cleanly: it " + u.how +
                       "; the end of its log (" + daemons->log_path(u.node) + "):\n" +
                       daemons->log_tail(u.node));
  if (hooks.daemons_stopped) hooks.daemons_stopped(unclean.empty());
  if (status == 0 && !unclean.empty()) status = 1;
  return status;
}

int launch(const std::vector<std::string>& args, const std::string& self) {
  if (wants_launch_help(args)) {
    std::cout << kLaunchHelp;
    return 0;
  }
  auto options = parse_launch_options(args);
  if (!options.ok()) {
    std::cerr << "ringsync launch: " << options.status().message() << "\n";
    return 2;
  }
  LaunchPlan plan;
  plan.options = std::move(options).value();
  return run_launch(plan, self);
}

}  // namespace ringsync::cli
