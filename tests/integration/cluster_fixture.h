// A multi-node job for one test: N real ringsyncd daemons, each a node of the
// same job (shared hostfile, job id and token), on loopback with a control port
// each or at places the test gives (network-namespace hosts); and groups of
// trainer processes (ringsync-test-rank scenarios) on them. Every wait has a
// deadline: a test fails, it never hangs.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "process.h"

namespace ringsync::test {

// Exit codes of ringsync-test-rank besides 0 (every check passed) and 1 (a check
// failed); the scenarios in rank_main.cpp use them, the tests assert on them.
namespace rank_exit {
inline constexpr int kUsage = 2;
inline constexpr int kConnectFailed = 3;
inline constexpr int kHangEnded = 4;
inline constexpr int kPeerLost = 10;         // RS_PEER_LOST with the expected text
inline constexpr int kPeerLostUnnamed = 11;  // RS_PEER_LOST, message lacks the expected text
inline constexpr int kOtherError = 12;       // any other error status
inline constexpr int kNoError = 13;          // a loop reached its bound without an error
inline constexpr int kStillWaiting = 14;     // a bounded wait ran out
}  // namespace rank_exit

// Where a node runs: the host and port of its control endpoint, and the argv
// prefix that starts a process there (empty: here; {ip, netns, exec, NAME}).
struct NodePlace {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;  // 0: a free loopback port
  std::vector<std::string> launcher;
  std::vector<std::string> flags;  // this node's own, after the options' extra flags
};

// A loopback port nobody listens on right now. Another process could take it
// before the daemon binds; rare enough on a test machine, and loud when it happens.
std::uint16_t free_loopback_port();

struct ClusterOptions {
  int nodes = 2;
  int local_size = 2;                    // slots per node = local ranks per node
  std::vector<std::string> extra_flags;  // appended to every daemon's command line
  std::map<std::string, std::string> daemon_env;  // added to every daemon's environment
  std::vector<NodePlace> places;         // one per node; empty: loopback
  std::string job_id = "cluster";
  // false: the daemons are pre-configured with the job (--hostfile ...);
  // true: they start with no job at all, and the trainers describe theirs
  // (RINGSYNC_NODES, RINGSYNC_NODE_RANK, RINGSYNC_JOB_TOKEN).
  bool service = false;
};

// Each daemon runs with its own --socket, --metrics-address 127.0.0.1:0,
// --ready-file, --control-address, --heartbeat-interval 100ms,
// --peer-timeout 1s, --collective-timeout 30s, --ucx-transports tcp,self
// (simulated nodes take the network path), --log-level debug; unless
// `service`, --hostfile (127.0.0.1:PORT slots=L per node, or the given
// places), the shared --job-id and --job-token; then the test's extra flags
// (a flag given again there wins).
class ClusterFixture {
 public:
  // Starts every daemon and waits (30 s at most) for their ready files; throws
  // with the logs when one exits or does not get ready.
  explicit ClusterFixture(ClusterOptions options);
  // Stops what still runs (SIGCONT first), without judging how it exits.
  ~ClusterFixture();
  ClusterFixture(const ClusterFixture&) = delete;
  ClusterFixture& operator=(const ClusterFixture&) = delete;

  int nodes() const { return options_.nodes; }
  int local_size() const { return options_.local_size; }
  int world_size() const { return options_.nodes * options_.local_size; }
  const std::string& job_id() const { return options_.job_id; }
  // The pre-configured job's key (--job-token), for tests that look for it on the wire.
  const std::string& token() const { return token_; }
  std::string control_address(int node) const;  // "host:port"
  const std::string& socket(int node) const { return nodes_[node].socket; }
  const std::string& metrics_host_port(int node) const { return nodes_[node].metrics; }
  std::string metrics(int node) const;  // the /metrics text, "" when unreachable
  // The transports label of node's ringsync_peer_transports_info for `peer`
  // ("tcp/lo", ...), "" when it has none.
  std::string peer_transports(int node, int peer) const;
  std::string log(int node) const;      // every run of the node, oldest first
  // Every node's log, labelled, each cut to its last `tail_bytes`: for failure messages.
  std::string logs(std::size_t tail_bytes = 6000) const;
  const std::vector<std::string>& launcher(int node) const { return nodes_[node].place.launcher; }
  const TempDir& dir() const { return dir_; }

  pid_t pid(int node) const { return nodes_[node].process.pid(); }
  bool running(int node);
  // SIGSTOP / SIGCONT / any signal to the daemon; SIGKILL also reaps it.
  void signal(int node, int sig);
  // Starts a node that was killed (or stopped and then killed) again, same
  // socket and control port, and waits for its ready file.
  void restart(int node);
  // SIGTERM (after SIGCONT when stopped); true when it exited 0 within 20 s.
  bool stop(int node);
  // Stops every node not killed by the test; "" when all exited 0, else what did not.
  std::string stop_all();

  bool service() const { return options_.service; }
  // "host:port,..." of every daemon's control port, by node rank.
  std::string node_list() const;

  // One job on these daemons, as its trainers see it.
  struct JobRun {
    std::string job_id;
    int local_size = 1;
    std::string token;        // the job's RINGSYNC_JOB_TOKEN (service daemons)
    bool rendezvous = false;  // service daemons: no node list, the daemons' --rendezvous assigns ranks
    bool one_node = false;    // service daemons: a job of the rank's node alone (RINGSYNC_NUM_NODES=1)
  };
  // The fixture's own job: its job id and local size.
  JobRun default_job() const;
  // A trainer's environment on `node` as `local_rank` of `job`. RINGSYNC_RANK and
  // RINGSYNC_SIZE are for information: the client learns its node from the
  // daemon. With service daemons the job is described: RINGSYNC_NODES,
  // RINGSYNC_NODE_RANK, RINGSYNC_JOB_TOKEN.
  std::map<std::string, std::string> rank_env(int node, int local_rank, const JobRun& job) const;
  std::map<std::string, std::string> rank_env(int node, int local_rank) const {
    return rank_env(node, local_rank, default_job());
  }

 private:
  enum class State { kRunning, kPaused, kKilled, kStopped };
  struct Node {
    NodePlace place;
    std::string socket, ready, metrics;
    std::vector<std::string> logs;  // one per run
    Child process;
    State state = State::kStopped;
  };
  void start_node(int node);
  void wait_ready(int node);

  ClusterOptions options_;
  TempDir dir_;
  std::string hostfile_;
  std::string token_;
  std::vector<Node> nodes_;
};

// The trainer processes of one run of the job, started as ringsync-test-rank
// SCENARIO ARGS... with marks and logs in a folder of their own.
class RankGroup {
 public:
  RankGroup(ClusterFixture& cluster, const std::string& tag);
  // The ranks of another job on the same daemons.
  RankGroup(ClusterFixture& cluster, const std::string& tag, ClusterFixture::JobRun job);

  void start(int node, int local_rank, const std::vector<std::string>& scenario);
  // The same with the whole ringsync environment given by the test (the
  // socket, marks and deadline are added): a trainer another launcher started.
  void start_with_env(int node, int local_rank, const std::vector<std::string>& scenario,
                      std::map<std::string, std::string> env);
  // Any trainer program (argv) on `node`, with `env` (the socket and deadline
  // added as for the others): a Python trainer, say.
  void start_program(int node, int local_rank, const std::vector<std::string>& argv,
                     std::map<std::string, std::string> env);
  // The rank's output so far (index in start order).
  std::string output(int index) const;
  void start_all(const std::vector<std::string>& scenario);  // every node, every local rank
  // Waits until the given ranks (all when empty) wrote mark `what` (see
  // rank_main.cpp); false at the deadline.
  bool wait_marks(const std::string& what, std::chrono::milliseconds timeout,
                  const std::vector<int>& which = {});
  // Waits for the given ranks (indices in start order; all when empty) up to one
  // shared deadline, SIGKILLing those still running then. Returns each one's exit
  // code, 128 + signal when killed by one, or -1 when it outlived the deadline.
  std::vector<int> wait(std::chrono::milliseconds timeout, std::vector<int> which = {});
  std::vector<int> on_node(int node) const;      // indices of the ranks on `node`
  std::vector<int> not_on_node(int node) const;  // and of the others
  // "node 1 rank 0 (global 2): exit 10" lines plus the tail of every rank's log.
  std::string report(std::size_t tail_bytes = 3000) const;
  std::size_t size() const { return ranks_.size(); }
  // The message of the first "peer lost" the rank printed ("" when none).
  std::string error_of(int index) const;
  // Whether the ranks (indices) printed the same error, which contains
  // every one of `words`; else a message saying which did not.
  std::string same_error(const std::vector<int>& which, const std::vector<std::string>& words) const;
  // Sends `sig` to the rank (index in start order); SIGKILL also reaps it.
  void signal(int index, int sig);
  pid_t pid(int index) const { return ranks_.at(index).process.pid(); }
  const ClusterFixture::JobRun& job() const { return job_; }

 private:
  struct Rank {
    int node = 0, local_rank = 0;
    Child process;
    std::string log;
    std::optional<int> code;
  };
  ClusterFixture& cluster_;
  ClusterFixture::JobRun job_;
  std::string dir_;
  std::vector<Rank> ranks_;
};

// One run of "a node dies or freezes while every rank is in an allreduce loop".
struct NodeLossRun {
  bool looping = false;        // every rank got through a first iteration
  std::vector<int> survivors;  // exit codes of the ranks on the other nodes
  std::vector<int> victims;    // of the ranks on the hurt node
  double survivors_seconds = 0;  // from the hurt to the last survivor's exit
};

// Starts `loop` on every rank (expecting peer lost naming "node VICTIM"), waits
// (60 s at most) until all are inside it, sends `sig` to the victim's daemon,
// then waits up to `deadline` for the other nodes' ranks, runs `between` (e.g.
// SIGCONT), and waits up to `deadline` for the victim's own ranks. `count`:
// the loop's f32 elements per allreduce ("": its default, 1 MiB).
NodeLossRun hurt_node_mid_loop(ClusterFixture& cluster, RankGroup& ranks, int victim, int sig,
                               const std::function<void()>& between = {},
                               std::chrono::seconds deadline = std::chrono::seconds(30),
                               const std::string& count = "");

// The same, with `hurt` doing the damage instead of a signal (e.g. cutting the
// victim's link).
NodeLossRun hurt_node_mid_loop(ClusterFixture& cluster, RankGroup& ranks, int victim,
                               const std::function<void()>& hurt, const std::function<void()>& between,
                               std::chrono::seconds deadline = std::chrono::seconds(30),
                               const std::string& count = "");

// Options for `nodes` loopback daemons with `local_size` slots each, and `extra` flags.
ClusterOptions cluster_options(int nodes, int local_size, std::vector<std::string> extra = {});

// True when every node but `except` still runs.
bool all_running(ClusterFixture& cluster, int except = -1);

// The first line of `log` that contains `text` and matches `pattern`, or "".
std::string find_line(const std::string& log, const std::string& text, const std::regex& pattern);

// "node 0: NAME=VALUE ..." per node, for failure messages ("absent" when a node lacks one).
std::string node_metric_summary(ClusterFixture& cluster, const std::vector<std::string>& names);

// The last `bytes` of text, marked as cut when it was longer.
std::string tail(const std::string& text, std::size_t bytes);

// True when every code is `want`.
bool all_equal(const std::vector<int>& codes, int want);

// The sum of every series of a Prometheus metric in /metrics text; nullopt when absent.
std::optional<double> metric_value(const std::string& metrics_text, const std::string& name);
// True once every node's ringsync_ring_nodes gauge says the ring has all
// nodes; false at the deadline.
bool wait_for_ring(ClusterFixture& cluster, std::chrono::seconds timeout);
// Runs `scenario` (ringsync-test-rank) on every rank of the cluster's job;
// true when all exit 0 within `timeout`, else says why (ranks' and daemons' logs).
bool run_job(ClusterFixture& cluster, const std::string& tag, const std::vector<std::string>& scenario,
             std::chrono::seconds timeout = std::chrono::seconds(120));

}  // namespace ringsync::test
