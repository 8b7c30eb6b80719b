// handoff-bench: what it costs on this machine to pass the turn from one
// process to another, the unit a small collective pays for every hop
// (trainer -> daemon -> peer daemon -> trainer; docs/benchmarks.md, 8 B).
//
//   handoff-bench [--iters N] [--runs R]
//
// Every row is the median (and range) over R runs of the mean cost of one
// hand-off, in microseconds:
//   syscall                     getppid(): entering and leaving the kernel
//   sched_yield, pinned         a yield on a CPU of its own (when nothing else
//                               runs there: an idle machine)
//   poll+yield, 2 procs, 1 CPU  two processes on one CPU pass a counter back and
//                               forth in shared memory, yielding while they wait
//                               (as ringsync's trainers and daemon poll)
//   poll+yield, 2 threads, 1 CPU  the same inside one process
//   poll+yield, 2 procs, 2 CPUs each on a CPU of its own
//   wake-up, 2 procs, 2 CPUs    each sleeps in poll() on a socket until the
//                               other writes a byte (as a doorbell does)
// One round trip before the clock starts lets the other side start and settle
// on its CPU. The measurement pins itself to the first one or two CPUs it may
// use; a side that waits 10 seconds for the other gives up, so a stuck side
// ends its row, not the run. Exit status 1 when a row failed.
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
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kGiveUp = std::chrono::seconds(10);
constexpr std::uint64_t kAbandoned = ~std::uint64_t{0};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "the relay shares an atomic between processes");

struct Options {
  int iters = 10000;
  int runs = 5;
};

// One run's mean microseconds per hand-off, or why there is none.
struct Measured {
  double us = 0;
  std::string error;  // empty: measured
};

Measured failed(std::string why) { return {0, std::move(why)}; }

std::string errno_text(const char* call) { return std::string(call) + " failed: " + std::strerror(errno); }

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

// One side of the shared-memory relay, rounds + 1 round trips: side 0 writes
// odd values, side 1 even ones; each waits, yielding, for the other's, at
// most kGiveUp each time. Side 0 notes in `timed_from` when the first round
// trip ended. False when the other side abandoned the relay or went silent.
bool relay(std::atomic<std::uint64_t>& turn, int side, int rounds, Clock::time_point* timed_from = nullptr) {
  for (int i = 0; i <= rounds; ++i) {
    const std::uint64_t mine = 2 * static_cast<std::uint64_t>(i) + 1 + side;
    if (side == 0) turn.store(mine, std::memory_order_release);
    const std::uint64_t wanted = side == 0 ? mine + 1 : mine - 1;
    const Clock::time_point give_up = Clock::now() + kGiveUp;
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
    if (i == 0 && timed_from != nullptr) *timed_from = Clock::now();
  }
  return true;
}

// One side of the socket relay, rounds + 1 round trips: side 0 writes first;
// each then sleeps in poll() until the other's byte came (or its end).
bool knock(int fd, int side, int rounds, Clock::time_point* timed_from = nullptr) {
  char byte = 0;
  for (int i = 0; i <= rounds; ++i) {
    for (int step = 0; step < 2; ++step) {
      if ((step == 0) == (side == 0)) {
        if (write(fd, &byte, 1) != 1) return false;
      } else {
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, static_cast<int>(std::chrono::milliseconds(kGiveUp).count())) != 1) return false;
        if (read(fd, &byte, 1) != 1) return false;  // 0: the other side ended
      }
    }
    if (i == 0 && timed_from != nullptr) *timed_from = Clock::now();
  }
  return true;
}

double per_handoff(Clock::time_point from, int rounds) {
  return std::chrono::duration<double, std::micro>(Clock::now() - from).count() / (2.0 * rounds);
}

// Side 0 here, side 1 in a child process, each on its CPU.
Measured across_processes(int cpu0, int cpu1, int rounds, bool sockets) {
  if (!pin(cpu0)) return failed(errno_text("sched_setaffinity"));
  void* shared = mmap(nullptr, sizeof(std::atomic<std::uint64_t>), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) return failed(errno_text("mmap"));
  auto* turn = new (shared) std::atomic<std::uint64_t>(0);
  int fds[2] = {-1, -1};
  if (sockets && socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) {
    const Measured why = failed(errno_text("socketpair"));
    munmap(shared, sizeof *turn);
    return why;
  }
  const pid_t child = fork();
  if (child == 0) {
    if (sockets) close(fds[0]);  // the parent's end: its exit then reads as the end here
    bool ok = pin(cpu1);
    if (!ok) turn->store(kAbandoned, std::memory_order_release);
    ok = ok && (sockets ? knock(fds[1], 1, rounds) : relay(*turn, 1, rounds));
    _exit(ok ? 0 : 1);
  }
  Measured result;
  if (child < 0) {
    result = failed(errno_text("fork"));
  } else {
    if (sockets) {
      close(fds[1]);
      fds[1] = -1;
    }
    Clock::time_point from;
    const bool ok = sockets ? knock(fds[0], 0, rounds, &from) : relay(*turn, 0, rounds, &from);
    if (ok) result.us = per_handoff(from, rounds);
    if (!ok) kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
    if (!ok) {
      result = failed("the other process stopped answering (or could not pin itself to CPU " +
                      std::to_string(cpu1) + ") within " + std::to_string(kGiveUp.count()) + " s");
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      result = failed("the other process failed");
    }
  }
  for (int fd : fds)
    if (fd >= 0) close(fd);
  munmap(shared, sizeof *turn);
  return result;
}

Measured across_threads(int cpu, int rounds) {
  if (!pin(cpu)) return failed(errno_text("sched_setaffinity"));
  std::atomic<std::uint64_t> turn{0};
  bool other_ok = false;
  std::thread other;
  try {
    other = std::thread([&] {
      other_ok = pin(cpu);
      if (!other_ok) turn.store(kAbandoned, std::memory_order_release);
      other_ok = other_ok && relay(turn, 1, rounds);
    });
  } catch (const std::system_error& e) {
    return failed(std::string("cannot start a thread: ") + e.what());
  }
  Clock::time_point from;
  const bool ok = relay(turn, 0, rounds, &from);
  const double us = ok ? per_handoff(from, rounds) : 0;
  other.join();
  if (!ok || !other_ok)
    return failed("the other thread stopped answering (or could not pin itself) within " +
                  std::to_string(kGiveUp.count()) + " s");
  return {us, ""};
}

Measured alone(int cpu, int calls, const std::function<void()>& call) {
  if (!pin(cpu)) return failed(errno_text("sched_setaffinity"));
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < calls; ++i) call();
  return {std::chrono::duration<double, std::micro>(Clock::now() - start).count() / calls, ""};
}

// Prints the row; false when a run failed.
bool row(const char* name, int runs, const std::function<Measured()>& measure) {
  std::vector<double> means;
  for (int r = 0; r < runs; ++r) {
    const Measured m = measure();
    if (!m.error.empty()) {
      std::printf("| %s | failed: %s |\n", name, m.error.c_str());
      std::fflush(stdout);
      return false;
    }
    means.push_back(m.us);
  }
  std::sort(means.begin(), means.end());
  const std::size_t n = means.size();
  const double median = n % 2 ? means[n / 2] : (means[n / 2 - 1] + means[n / 2]) / 2;
  std::printf("| %s | %.2f | %.2f-%.2f |\n", name, median, means.front(), means.back());
  std::fflush(stdout);
  return true;
}

constexpr const char* kUsage = "usage: handoff-bench [--iters N] [--runs R]";

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::printf("%s\n", kUsage);
      std::exit(0);
    }
    if (arg != "--iters" && arg != "--runs") {
      std::fprintf(stderr, "handoff-bench: unknown argument '%s'; %s\n", arg.c_str(), kUsage);
      return false;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "handoff-bench: %s needs a count; %s\n", arg.c_str(), kUsage);
      return false;
    }
    char* end = nullptr;
    errno = 0;
    const long value = std::strtol(argv[++i], &end, 10);
    if (errno != 0 || end == argv[i] || *end != '\0' || value < 1 || value > 10'000'000) {
      std::fprintf(stderr, "handoff-bench: %s takes a count from 1 to 10000000, not '%s'\n", arg.c_str(), argv[i]);
      return false;
    }
    (arg == "--iters" ? o.iters : o.runs) = static_cast<int>(value);
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
  if (cpus.size() > 1) {
    std::printf("handoff-bench: %d iterations, median of %d runs, CPUs %d and %d\n\n", o.iters, o.runs, cpus[0],
                cpus[1]);
  } else {
    std::printf("handoff-bench: %d iterations, median of %d runs, CPU %d\n\n", o.iters, o.runs, cpus[0]);
  }
  std::printf("| hand-off | us (median) | range |\n|---|---:|---:|\n");
  const int calls = o.iters * 10;
  bool ok = true;
  ok &= row("syscall (getppid)", o.runs, [&] { return alone(cpus[0], calls, [] { syscall(SYS_getppid); }); });
  ok &= row("sched_yield, pinned", o.runs, [&] { return alone(cpus[0], calls, [] { sched_yield(); }); });
  ok &= row("poll+yield, 2 processes, 1 CPU", o.runs, [&] { return across_processes(cpus[0], cpus[0], o.iters, false); });
  ok &= row("poll+yield, 2 threads, 1 CPU", o.runs, [&] { return across_threads(cpus[0], o.iters); });
  if (cpus.size() < 2) {
    std::printf("\nOne CPU only: the rows across two CPUs are skipped.\n");
    return ok ? 0 : 1;
  }
  ok &= row("poll+yield, 2 processes, 2 CPUs", o.runs, [&] { return across_processes(cpus[0], cpus[1], o.iters, false); });
  ok &= row("wake-up (poll on a socket), 2 processes, 2 CPUs", o.runs,
            [&] { return across_processes(cpus[0], cpus[1], o.iters, true); });
  return ok ? 0 : 1;
}
