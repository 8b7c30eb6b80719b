// A whole `ringsync launch` run: daemons up, ranks run, daemons down. The launch
// command and the demo are both this, with different hooks.
#pragma once

#include <functional>
#include <string>

#include "cli/launch_options.h"

namespace ringsync::cli {

class NodeDaemons;

struct LaunchPlan {
  LaunchOptions options;
  std::string tool = "ringsync launch";  // how messages begin
  int raw_stdout_rank = -1;              // see RanksSpec
  // Extra daemon arguments placed before options.daemon_args (so a user's win).
  std::vector<std::string> default_daemon_args;
};

struct LaunchHooks {
  // Every daemon is ready, no rank started yet. Default: a summary line on stderr.
  std::function<void(const NodeDaemons&)> daemons_ready;
  // Every rank has exited; the daemons still serve (the demo reads /metrics here).
  std::function<void(const NodeDaemons&, int exit_status)> ranks_done;
  // The daemons are stopped; `clean` when every one exited 0.
  std::function<void(bool clean)> daemons_stopped;
};

// Runs the plan; `self` is this program's path (ringsyncd is looked for next to it).
// Returns the exit status documented in kLaunchHelp.
int run_launch(const LaunchPlan& plan, const std::string& self, const LaunchHooks& hooks = {});

}  // namespace ringsync::cli
