// Subcommands of the `ringsync` tool.
#pragma once

#include <string>
#include <vector>

namespace ringsync::cli {

// ringsync demo: a daemon and local trainer ranks on this machine, allreduce
// from small to large, every result verified, a bandwidth table.
int demo(const std::vector<std::string>& args, const std::string& self);

// One trainer rank of the demo (started by `demo`; rank and socket come from the
// environment, as for any trainer).
int demo_rank(const std::vector<std::string>& args);

}  // namespace ringsync::cli
