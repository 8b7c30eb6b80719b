#include "cli/trainer_ranks.h"

#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "cli/exit_status.h"
#include "cli/node_daemons.h"
#include "cli/output_prefixer.h"
#include "cli/stop_signals.h"
#include "common/loopback_port.h"
#include "common/subprocess.h"
#include "common/units.h"

namespace ringsync::cli {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// After SIGKILL a process can only be stuck in the kernel; stop waiting for it then.
constexpr auto kGiveUpAfterKill = 10s;
// Read at most this much per stream per round, so one chatty rank cannot starve
// the others (or the loop, when a stray grandchild writes forever).
constexpr std::size_t kReadChunk = 64 * 1024;
constexpr std::size_t kFinalDrainLimit = 4 << 20;

struct Stream {
  int fd;
  LinePrefixer lines;
  bool open = true;

  // One read; false at end of stream or on an error (then the stream is done).
  bool read_once() {
    char buf[kReadChunk];
    ssize_t n;
    do {
      n = ::read(fd, buf, sizeof buf);
    } while (n < 0 && errno == EINTR);
    if (n > 0) {
      lines.feed(std::string_view(buf, static_cast<std::size_t>(n)));
      return true;
    }
    if (n < 0 && errno == EAGAIN) return false;
    lines.finish();
    open = false;
    return false;
  }

  // What is in the pipe now, up to `limit` bytes (not waiting for more).
  void drain(std::size_t limit) {
    for (std::size_t done = 0; open && done < limit && read_once(); done += kReadChunk) {
    }
  }
};

struct Rank {
  int rank;
  int node;
  int local;
  Child child;
  Stream out;
  Stream err;
  std::optional<int> status;

  std::string name() const {
    return "rank " + std::to_string(rank) + " (node " + std::to_string(node) + ", local rank " +
           std::to_string(local) + ")";
  }
};

// Two pipes per rank: raise the soft open-file limit when the job needs more.
void allow_open_files(std::size_t needed) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= needed) return;
  limit.rlim_cur = std::min<rlim_t>(limit.rlim_max, needed);
  ::setrlimit(RLIMIT_NOFILE, &limit);
}

// A TCP port free on 127.0.0.1 now, for torch.distributed's env:// rendezvous:
// rank 0's store listens there (common/loopback_port.h). "" if none.
std::string free_loopback_port() {
  auto ports = free_loopback_ports(1);
  return ports.ok() && !ports->empty() ? std::to_string(ports->front()) : "";
}

int millis_until(Clock::time_point t) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 250));
}

}  // namespace

void say(const std::string& tool, const std::string& text) {
  std::string line = tool + ": " + text;
  if (line.empty() || line.back() != '\n') line += '\n';
  write_all(2, line);
}

int run_trainer_ranks(const RanksSpec& spec, NodeDaemons* daemons, StopSignals& signals) {
  const int size = spec.nodes * spec.slots;
  allow_open_files(static_cast<std::size_t>(size) * 2 + 64);

  int result = -1;  // the job's exit status once decided
  bool stopping = false;
  bool killed = false;
  Clock::time_point kill_at, give_up_at;
  std::vector<Rank> ranks;
  ranks.reserve(size);

  auto stop_all = [&](int code, const std::string& why) {
    if (result < 0) result = code;
    if (stopping) return;
    stopping = true;
    int running = 0;
    for (auto& r : ranks) running += r.status ? 0 : 1;
    say(spec.tool, why + (running > 0 ? "; stopping the " + std::to_string(running) + " rank(s) still running"
                                      : ""));
    kill_at = Clock::now() + std::chrono::duration_cast<Clock::duration>(spec.stop_grace);
    for (auto& r : ranks) r.child.signal_group(SIGTERM);
  };

  // Every rank runs on this machine, so torch.distributed's rendezvous (env://, for
  // init_process_group("ringsync") or "gloo") meets on 127.0.0.1.
  const std::string torch_port = free_loopback_port();
  for (int rank = 0; rank < size && !stopping; ++rank) {
    const int node = rank / spec.slots, local = rank % spec.slots;
    SpawnOptions options;
    options.extra_env = {{"RINGSYNC_SOCKET", spec.sockets.at(node)},
                         {"RINGSYNC_JOB_ID", spec.job_id},
                         {"RINGSYNC_RANK", std::to_string(rank)},
                         {"RINGSYNC_SIZE", std::to_string(size)},
                         {"RINGSYNC_LOCAL_RANK", std::to_string(local)},
                         {"RINGSYNC_LOCAL_SIZE", std::to_string(spec.slots)},
                         {"RINGSYNC_NODE_RANK", std::to_string(node)},
                         {"RINGSYNC_NUM_NODES", std::to_string(spec.nodes)},
                         // torch.distributed's names for the same (as torchrun sets them).
                         {"RANK", std::to_string(rank)},
                         {"WORLD_SIZE", std::to_string(size)},
                         {"LOCAL_RANK", std::to_string(local)},
                         {"LOCAL_WORLD_SIZE", std::to_string(spec.slots)},
                         {"MASTER_ADDR", "127.0.0.1"}};
    if (!torch_port.empty()) options.extra_env["MASTER_PORT"] = torch_port;
    if (!spec.control_addresses.empty()) {
      std::string nodes;
      for (const auto& a : spec.control_addresses) nodes += (nodes.empty() ? "" : ",") + a;
      options.extra_env["RINGSYNC_NODES"] = nodes;
      options.extra_env["RINGSYNC_JOB_TOKEN"] = spec.job_token;
    }
    options.capture_output = true;
    options.null_stdin = true;
    options.own_process_group = true;
    options.parent_death_signal = SIGKILL;
    auto child = Child::start_with(spec.command, options);
    if (!child.ok()) {
      stop_all(1, "cannot start rank " + std::to_string(rank) + ": " + child.status().message());
      break;
    }
    const std::string prefix = "[rank " + std::to_string(rank) + "] ";
    const int out_fd = child->stdout_fd(), err_fd = child->stderr_fd();
    ranks.push_back(Rank{rank, node, local, std::move(child).value(),
                         Stream{out_fd, LinePrefixer(rank == spec.raw_stdout_rank ? "" : prefix, 1)},
                         Stream{err_fd, LinePrefixer(prefix, 2)}, std::nullopt});
  }

  const Clock::time_point deadline =
      spec.timeout ? Clock::now() + std::chrono::duration_cast<Clock::duration>(*spec.timeout)
                   : Clock::time_point::max();
  std::vector<pollfd> fds;
  std::vector<Stream*> streams;
  for (;;) {
    int running = 0;
    for (auto& r : ranks) running += r.status ? 0 : 1;
    if (running == 0) break;

    fds.assign(1, pollfd{signals.wake_fd(), POLLIN, 0});
    streams.assign(1, nullptr);
    for (auto& r : ranks)
      for (Stream* s : {&r.out, &r.err})
        if (s->open) {
          fds.push_back(pollfd{s->fd, POLLIN, 0});
          streams.push_back(s);
        }
    int wait_ms = 250;
    if (!stopping) wait_ms = std::min(wait_ms, millis_until(deadline));
    if (stopping && !killed) wait_ms = std::min(wait_ms, millis_until(kill_at));
    if (::poll(fds.data(), fds.size(), wait_ms) < 0 && errno != EINTR) {
      stop_all(1, std::string("poll failed: ") + std::strerror(errno));
      ::usleep(10000);  // not a busy loop while the ranks are stopped
    }
    for (std::size_t i = 1; i < fds.size(); ++i)
      if (fds[i].revents != 0) streams[i]->read_once();

    if (signals.drain() > 0) {
      const int sig = signals.first_stop_signal();
      if (!stopping) {
        stop_all(128 + sig, sig == SIGPIPE ? std::string("the reader of our output went away (SIGPIPE)")
                                            : std::string("received ") + signal_name(sig) +
                                                  " (send it again to kill at once)");
      } else if (!killed) {
        kill_at = Clock::now();  // a second signal: no more grace
      }
    }
    // Daemons first: a trainer failing because its daemon died should not hide that.
    for (auto [node, st] : daemons ? daemons->newly_exited() : std::vector<std::pair<int, int>>{}) {
      say(spec.tool, "node " + std::to_string(node) + "'s ringsyncd (pid " + std::to_string(daemons->pid(node)) +
                         ") " + describe_exit(st) + " during the job; the end of its log (" +
                         daemons->log_path(node) + "):\n" + daemons->log_tail(node));
      stop_all(1, "node " + std::to_string(node) + "'s daemon is gone");
    }
    for (auto& r : ranks) {
      if (r.status) continue;
      auto st = r.child.wait(0ms);
      if (!st) continue;
      // Its last words before the verdict.
      r.out.drain(kFinalDrainLimit);
      r.err.drain(kFinalDrainLimit);
      r.status = st;
      if (exit_code(*st) != 0 && !stopping) stop_all(exit_code(*st), r.name() + " " + describe_exit(*st));
    }
    if (!stopping && Clock::now() >= deadline)
      stop_all(124, "the job ran longer than --timeout " + units::format_duration(*spec.timeout));
    if (stopping && !killed && Clock::now() >= kill_at) {
      int left = 0;
      for (auto& r : ranks)
        if (!r.status) {
          ++left;
          r.child.signal_group(SIGKILL);
        }
      if (left > 0)
        say(spec.tool, std::to_string(left) + " rank(s) still running after SIGTERM; sent SIGKILL");
      killed = true;
      give_up_at = Clock::now() + kGiveUpAfterKill;
    }
    if (killed && Clock::now() >= give_up_at) {
      for (auto& r : ranks)
        if (!r.status) say(spec.tool, r.name() + " (pid " + std::to_string(r.child.pid()) +
                                          ") did not exit after SIGKILL; leaving it");
      break;
    }
  }
  // What is still in the pipes; a process that outlived its rank may hold them
  // open, so do not wait for their end.
  for (auto& r : ranks)
    for (Stream* s : {&r.out, &r.err}) {
      s->drain(kFinalDrainLimit);
      s->lines.finish();
    }
  return result < 0 ? 0 : result;
}

}  // namespace ringsync::cli
