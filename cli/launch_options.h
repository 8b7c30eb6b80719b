// `ringsync launch` options: how many simulated nodes and slots, what to tell the
// daemons, and the trainer command after "--".
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace ringsync::cli {

inline constexpr int kMaxNodes = 64;
inline constexpr int kMaxSlots = 4096;

struct LaunchOptions {
  int nodes = 0;  // --nodes: ringsyncd daemons, one per simulated node
  // --daemon SOCKET@HOST:PORT, in node order: daemons that run already (no
  // job flags), their socket and control address; then --nodes is their count.
  struct Attached {
    std::string socket;
    std::string control;  // HOST:PORT
  };
  std::vector<Attached> attach;
  int slots = 0;  // --slots: trainer processes per node
  std::string job_id = "default";
  std::vector<std::string> daemon_args;  // --daemon-arg, in order, to every daemon
  std::string log_dir;                   // --log-dir; "" keeps logs in the private run dir
  std::optional<std::chrono::nanoseconds> timeout;
  // --stop-grace: between SIGTERM and SIGKILL when the job is stopped.
  std::chrono::nanoseconds stop_grace = std::chrono::seconds(10);
  std::vector<std::string> command;  // after "--"; command[0] as the user typed it
};

extern const char* const kLaunchHelp;

// True when --help or -h comes before "--".
bool wants_launch_help(const std::vector<std::string>& args);
// Reads the arguments after `ringsync launch`; an error says what was wrong and
// what to type instead.
Result<LaunchOptions> parse_launch_options(const std::vector<std::string>& args);

}  // namespace ringsync::cli
