// --control-cpus: the control thread of a real daemon runs where it is told,
// its other threads (reduce pool, the ring's, UCX's) keep every CPU the daemon
// was given, the job runs as usual, and a CPU the daemon may not use is refused
// before it starts serving.
#include <doctest/doctest.h>
#include <sched.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "cluster_fixture.h"
#include "common/cpu_list.h"
#include "daemon_fixture.h"

namespace test_integration_thread_cpus {

using namespace ringsync::test;
using namespace std::chrono_literals;

namespace {

// The CPUs this test process may run on.
std::vector<int> my_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(::sched_getaffinity(0, sizeof set, &set) == 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

// One of the daemon's threads: its name and the CPUs the kernel lets it use.
struct ThreadPlace {
  std::string name;
  std::string cpus;  // Cpus_allowed_list, e.g. "0-1"
};

// Every thread of process `pid`, by thread id.
std::map<int, ThreadPlace> threads_of(pid_t pid) {
  std::map<int, ThreadPlace> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
    ThreadPlace place;
    std::ifstream comm(entry.path() / "comm");
    std::getline(comm, place.name);
    std::ifstream status(entry.path() / "status");
    for (std::string line; std::getline(status, line);) {
      const std::string key = "Cpus_allowed_list:";
      if (line.rfind(key, 0) != 0) continue;
      const auto value = line.find_first_not_of(" \t", key.size());
      if (value != std::string::npos) place.cpus = line.substr(value);
    }
    // A thread that ended while we looked has no status left: not counted.
    if (!place.cpus.empty()) out[std::stoi(entry.path().filename().string())] = place;
  }
  return out;
}

}  // namespace

TEST_CASE("--control-cpus keeps the control thread on its CPU and every other thread where the daemon may run") {
  const std::vector<int> cpus = my_cpus();
  if (cpus.size() < 2) {
    MESSAGE("skipped: with one CPU every thread runs on it, so the placement cannot be told apart");
    return;
  }
  const std::string all = ringsync::format_cpu_list(cpus);
  const std::string control = std::to_string(cpus.back());
  REQUIRE(control != all);
  ClusterOptions options;
  options.nodes = 2;
  options.local_size = 2;
  options.extra_flags = {"--control-cpus", control};
  ClusterFixture cluster(options);
  REQUIRE_MESSAGE(wait_for_ring(cluster, 30s), cluster.logs());

  // A job of small (direct exchange) and ring-sized allreduces runs as usual.
  RankGroup ranks(cluster, "pinned");
  ranks.start_all({"collectives", "2", "3", "1001", "786433"});
  CHECK_MESSAGE(ranks.wait(120s) == std::vector<int>(4, 0), ranks.report(), cluster.logs());

  for (int node = 0; node < cluster.nodes(); ++node) {
    CAPTURE(node);
    const pid_t pid = cluster.pid(node);
    // The run's end closes the ring and a new one forms (with a new ring
    // thread) for the next run: look once it has.
    auto threads = threads_of(pid);
    for (int i = 0; i < 200; ++i) {
      bool has_ring = false;
      for (const auto& [tid, place] : threads) has_ring = has_ring || place.name == "rs-ring";
      if (has_ring) break;
      std::this_thread::sleep_for(50ms);
      threads = threads_of(pid);
    }
    REQUIRE(threads.count(pid) == 1);
    CHECK(threads.at(pid).cpus == control);  // the control thread is the main thread
    int pool = 0;
    int ring = 0;
    for (const auto& [tid, place] : threads) {
      if (tid == pid) continue;
      CAPTURE(place.name);
      // Pool and timeline threads started before the control thread was
      // bound; the ring's and UCX's were started by it, inside the scope.
      CHECK(place.cpus == all);
      pool += place.name == "rs-pool";
      ring += place.name == "rs-ring";
    }
    CHECK(pool >= 1);
    CHECK(ring == 1);
    CHECK(cluster.log(node).find("control thread on CPU(s) " + control + "; other threads on " + all) !=
          std::string::npos);
  }
  CHECK(cluster.stop_all() == "");
}

TEST_CASE("--control-cpus naming a CPU the daemon may not use, or no CPU list at all, is refused at start") {
  const std::vector<int> cpus = my_cpus();
  int missing = 0;
  while (std::find(cpus.begin(), cpus.end(), missing) != cpus.end()) ++missing;
  TempDir dir;
  const std::string common = " --metrics-address off --socket " + dir.file("d.sock");
  auto [rc, out] = run_command(bin("ringsyncd") + common + " --control-cpus " + std::to_string(missing));
  CHECK(rc == 1);
  CHECK_MESSAGE(out.find("--control-cpus " + std::to_string(missing) + ": CPU " + std::to_string(missing) +
                         " is not one ringsyncd may run on (" + ringsync::format_cpu_list(cpus) + ")") !=
                    std::string::npos,
                out);
  CHECK_FALSE(std::filesystem::exists(dir.file("d.sock")));  // refused before it listened

  auto [bad_rc, bad] = run_command(bin("ringsyncd") + common + " --control-cpus 3-1");
  CHECK(bad_rc == 2);
  CHECK_MESSAGE(bad.find("control-cpus must be a CPU list such as 3 or 2-3,6: the CPU range '3-1' runs backwards "
                         "(--control-cpus from flag)") != std::string::npos,
                bad);
}

}  // namespace test_integration_thread_cpus
