// `ringsync top` options: which daemons, which job, how often.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "cli/top/targets.h"
#include "common/status.h"

namespace ringsync::cli::top {

struct Options {
  std::vector<Target> targets;    // --metrics, bare addresses and --launch-dir, in that order
  std::string origin;             // where the targets came from when found (for the header); "" when given
  std::string job_id;             // --job-id: only this job's series
  std::chrono::nanoseconds interval = std::chrono::seconds(2);
  std::chrono::nanoseconds timeout = std::chrono::seconds(2);  // per scrape of one daemon
  bool once = false;
  bool help = false;
};

extern const char* const kHelp;

// Reads the arguments after `ringsync top`. With no address and no --launch-dir,
// the newest `ringsync launch` of this user here is watched. Errors say what to type.
Result<Options> parse_options(const std::vector<std::string>& args);

}  // namespace ringsync::cli::top
