// handoff-bench: what it costs on this machine to pass the turn from one
// process to another, the unit a small collective pays for every hop
// (trainer -> daemon -> peer daemon -> trainer; docs/benchmarks.md, 8 B).
//
//   handoff-bench [--iters N] [--runs R]
//
// Every row is the median (and range) over R runs of the mean cost of one
// hand-off, in microseconds:
//   syscall                     getppid(): entering and leaving the kernel
//   sched_yield, alone          nothing else runnable on that CPU
//   poll+yield, 2 procs, 1 CPU  two processes on one CPU pass a counter back and
//                               forth in shared memory, yielding while they wait
//                               (as ringsync's trainers and daemon poll)
//   poll+yield, 2 threads, 1 CPU  the same inside one process
//   poll+yield, 2 procs, 2 CPUs each on a CPU of its own
//   wake-up, 2 procs, 2 CPUs    each sleeps in poll() on a socket until the
//                               other writes a byte (as a doorbell does)
// The measurement pins itself to the first one or two CPUs it may use; every
// wait gives up after 10 seconds, so a stuck side ends the row, not the run.
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kGiveUp = std::chrono::seconds(10);
constexpr std::uint64_t kAbandoned = ~std::uint64_t{0};

struct Options {
  int iters = 10000;
  int runs = 5;
};

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

bool pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return sched_setaffinity(0, sizeof set, &set) == 0;
}

// One side of the shared-memory relay: side 0 writes odd values, side 1 even
// ones; each waits, yielding, for the other's. False when the other side
// abandoned the relay or did not answer in time.
bool relay(std::atomic<std::uint64_t>& turn, int side, int iters) {
  const Clock::time_point give_up = Clock::now() + kGiveUp;
  for (int i = 0; i < iters; ++i) {
    const std::uint64_t mine = 2 * static_cast<std::uint64_t>(i) + 1 + side;
    if (side == 0) turn.store(mine, std::memory_order_release);
    const std::uint64_t wanted = side == 0 ? mine + 1 : mine - 1;
    for (unsigned spins = 0;; ++spins) {
      const std::uint64_t seen = turn.load(std::memory_order_acquire);
      if (seen == kAbandoned) return false;
      if (seen == wanted) break;
      if (spins % 1024 == 1023 && Clock::now() > give_up) {
        turn.store(kAbandoned, std::memory_order_release);
        return false;
      }
      sched_yield();
    }
    if (side == 1) turn.store(mine, std::memory_order_release);
  }
  return true;
}

// One side of the socket relay: side 0 writes first; each then sleeps in
// poll() until the other's byte came.
bool knock(int fd, int side, int iters) {
  char byte = 0;
  for (int i = 0; i < iters; ++i) {
    for (int step = 0; step < 2; ++step) {
      if ((step == 0) == (side == 0)) {
        if (write(fd, &byte, 1) != 1) return false;
      } else {
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, static_cast<int>(std::chrono::milliseconds(kGiveUp).count())) != 1) return false;
        if (read(fd, &byte, 1) != 1) return false;
      }
    }
  }
  return true;
}

// Runs side 0 here and side 1 in a child process, each on its CPU; the mean
// time of one hand-off (half a round trip), or nullopt.
std::optional<double> across_processes(int cpu0, int cpu1, int iters, bool sockets) {
  void* shared = mmap(nullptr, sizeof(std::atomic<std::uint64_t>), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) return std::nullopt;
  auto* turn = new (shared) std::atomic<std::uint64_t>(0);
  int fds[2] = {-1, -1};
  if (sockets && socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) {
    munmap(shared, sizeof *turn);
    return std::nullopt;
  }
  const pid_t child = fork();
  if (child == 0) {
    const bool ok = pin(cpu1) && (sockets ? knock(fds[1], 1, iters) : relay(*turn, 1, iters));
    _exit(ok ? 0 : 1);
  }
  std::optional<double> result;
  if (child > 0) {
    pin(cpu0);
    const Clock::time_point start = Clock::now();
    const bool ok = sockets ? knock(fds[0], 0, iters) : relay(*turn, 0, iters);
    const Clock::duration took = Clock::now() - start;
    if (!ok) kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    if (ok && WIFEXITED(status) && WEXITSTATUS(status) == 0)
      result = std::chrono::duration<double, std::micro>(took).count() / (2.0 * iters);
  }
  if (sockets) {
    close(fds[0]);
    close(fds[1]);
  }
  munmap(shared, sizeof *turn);
  return result;
}

std::optional<double> across_threads(int cpu, int iters) {
  std::atomic<std::uint64_t> turn{0};
  bool other_ok = false;
  std::thread other([&] { other_ok = pin(cpu) && relay(turn, 1, iters); });
  pin(cpu);
  const Clock::time_point start = Clock::now();
  const bool ok = relay(turn, 0, iters);
  const Clock::duration took = Clock::now() - start;
  other.join();
  if (!ok || !other_ok) return std::nullopt;
  return std::chrono::duration<double, std::micro>(took).count() / (2.0 * iters);
}

std::optional<double> alone(int cpu, int iters, const std::function<void()>& call) {
  if (!pin(cpu)) return std::nullopt;
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < iters; ++i) call();
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count() / iters;
}

void row(const char* name, int runs, const std::function<std::optional<double>()>& measure) {
  std::vector<double> means;
  for (int r = 0; r < runs; ++r) {
    auto mean = measure();
    if (!mean) {
      std::printf("| %s | failed: a side did not answer within %lld s |\n", name,
                  static_cast<long long>(kGiveUp.count()));
      return;
    }
    means.push_back(*mean);
  }
  std::sort(means.begin(), means.end());
  std::printf("| %s | %.2f | %.2f-%.2f |\n", name, means[means.size() / 2], means.front(), means.back());
  std::fflush(stdout);
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "--iters" || arg == "--runs") && i + 1 < argc) {
      char* end = nullptr;
      const long value = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || value < 1 || value > 10'000'000) {
        std::fprintf(stderr, "handoff-bench: %s takes a count from 1 to 10000000, not '%s'\n", arg.c_str(), argv[i]);
        return false;
      }
      (arg == "--iters" ? o.iters : o.runs) = static_cast<int>(value);
    } else if (arg == "--help" || arg == "-h") {
      std::printf("usage: handoff-bench [--iters N] [--runs R]\n");
      std::exit(0);
    } else {
      std::fprintf(stderr, "handoff-bench: unknown argument '%s'; usage: handoff-bench [--iters N] [--runs R]\n",
                   arg.c_str());
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) return 2;
  const std::vector<int> cpus = allowed_cpus();
  if (cpus.empty()) {
    std::fprintf(stderr, "handoff-bench: cannot read this process's CPUs (sched_getaffinity failed)\n");
    return 1;
  }
  std::printf("handoff-bench: %d iterations, median of %d runs, CPUs %d and %d\n\n", o.iters, o.runs, cpus[0],
              cpus.size() > 1 ? cpus[1] : cpus[0]);
  std::printf("| hand-off | us (median) | range |\n|---|---:|---:|\n");
  const int many = o.iters * 10;
  row("syscall (getppid)", o.runs, [&] { return alone(cpus[0], many, [] { syscall(SYS_getppid); }); });
  row("sched_yield, alone on a CPU", o.runs, [&] { return alone(cpus[0], many, [] { sched_yield(); }); });
  row("poll+yield, 2 processes, 1 CPU", o.runs, [&] { return across_processes(cpus[0], cpus[0], o.iters, false); });
  row("poll+yield, 2 threads, 1 CPU", o.runs, [&] { return across_threads(cpus[0], o.iters); });
  if (cpus.size() < 2) {
    std::printf("\nOne CPU only: the rows across two CPUs are skipped.\n");
    return 0;
  }
  row("poll+yield, 2 processes, 2 CPUs", o.runs, [&] { return across_processes(cpus[0], cpus[1], o.iters, false); });
  row("wake-up (poll on a socket), 2 processes, 2 CPUs", o.runs,
      [&] { return across_processes(cpus[0], cpus[1], o.iters, true); });
  return 0;
}
