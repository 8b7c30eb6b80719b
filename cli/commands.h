// Subcommands of the `ringsync` tool.
#pragma once

#include <string>
#include <vector>

namespace ringsync::cli {

// ringsync launch: N ringsyncd daemons as simulated nodes on this machine and L
// copies of a trainer command per node (see kLaunchHelp in launch_options.cpp).
int launch(const std::vector<std::string>& args, const std::string& self);

// ringsync demo: `launch` with the demo trainer (2 nodes x 2 slots by default):
// allreduce from small to large, every result verified, a bandwidth table.
int demo(const std::vector<std::string>& args, const std::string& self);

// One trainer rank of the demo (started by `demo`; ranks and socket come from the
// environment, as for any trainer).
int demo_rank(const std::vector<std::string>& args);

// ringsync wait: until a ringsyncd accepts connections on the socket trainers
// here would use (or --socket), at most --timeout.
int wait_daemon(const std::vector<std::string>& args);

// ringsync top: a live view of a job from its daemons' /metrics (see
// cli/top/options.cpp for the options), or one plain snapshot with --once.
int top_command(const std::vector<std::string>& args);

}  // namespace ringsync::cli
