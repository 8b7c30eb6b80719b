// The daemons of `ringsync launch`: one ringsyncd per simulated node on this
// machine, each with its own socket, control port and metrics port, all sharing
// one hostfile and job token.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/subprocess.h"

namespace ringsync::cli {

// Once every daemon is ready, their metrics addresses (HOST:PORT, one per line,
// node order; none for a daemon without metrics) are in this file of the run
// directory and of the log directory, for `ringsync top --launch-dir DIR`; stop()
// removes it from the log directory, which outlives the run.
inline constexpr const char* kMetricsAddressesFile = "metrics-addresses";

// 128 random bits as hex: a job token that keeps other jobs' daemons out.
std::string random_job_token();

struct DaemonSpec {
  int nodes = 1;
  int slots = 1;
  std::string job_id = "default";
  std::vector<std::string> extra_args;  // after the launcher's own flags
  std::string program;                  // the ringsyncd to run
  std::filesystem::path run_dir;        // hostfile, node-I.sock, node-I.ready
  std::filesystem::path log_dir;        // node-I.log
  std::chrono::seconds ready_timeout{120};
};

class NodeDaemons {
 public:
  // Starts every daemon and waits for every ready file. When a daemon exits during
  // start-up (most likely a port taken since it was chosen), stops the others and
  // starts them all once more on new ports. `should_stop` is asked while waiting;
  // when it says yes the result is a kClosed error. Other errors name the node and
  // end with the last lines of its log.
  static Result<NodeDaemons> start(const DaemonSpec& spec, const std::function<bool()>& should_stop);

  NodeDaemons() = default;
  NodeDaemons(NodeDaemons&&) = default;
  NodeDaemons& operator=(NodeDaemons&&) = default;

  int size() const { return static_cast<int>(nodes_.size()); }
  const std::string& socket(int node) const { return nodes_[node].socket; }
  // "127.0.0.1:PORT" from the ready file; "" when the daemon serves no metrics.
  const std::string& metrics(int node) const { return nodes_[node].metrics; }
  pid_t pid(int node) const { return nodes_[node].process.pid(); }
  std::string log_path(int node) const;
  // The end of node's log, each line as "[node I ringsyncd] ...".
  std::string log_tail(int node, int max_lines = 20) const;

  // Nodes whose daemon exited by itself since the last call, with wait statuses.
  std::vector<std::pair<int, int>> newly_exited();

  struct Unclean {
    int node;
    std::string how;  // "exited with status 1", "did not exit in 20s (killed)"
  };
  // SIGTERM to every daemon still running, SIGKILL to any left after `grace`.
  // Returns those that did not exit 0 (leaving out those newly_exited reported).
  std::vector<Unclean> stop(std::chrono::milliseconds grace);

 private:
  struct Node {
    Child process;
    std::string socket;
    std::string ready_file;
    std::string metrics;
    bool reported = false;  // its exit was reported by newly_exited
  };

  // Writes kMetricsAddressesFile into the run and log directories.
  Status record_metrics_addresses() const;

  DaemonSpec spec_;
  std::vector<Node> nodes_;
};

}  // namespace ringsync::cli
