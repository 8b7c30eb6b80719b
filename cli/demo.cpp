// ringsync demo: the main job on one machine with no configuration. It is
// `ringsync launch` (2 simulated nodes x 2 slots by default) running the demo
// trainer, with a look at node 0's /metrics before the daemons stop.
#include <cstdio>
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "cli/launch.h"
#include "cli/node_daemons.h"
#include "cli/options.h"
#include "common/http_get.h"

namespace ringsync::cli {
namespace {

constexpr int kMaxDemoRanks = 64;

const char* kHelp =
    "usage: ringsync demo [--nodes N] [--slots L] [--ranks N] [--min-bytes B] [--max-bytes B]\n"
    "                     [--iters N]\n\n"
    "Runs a multi-node job on this machine, as 'ringsync launch' does: one ringsyncd per\n"
    "simulated node (--nodes, default 2) and --slots trainer processes per node (default 2).\n"
    "--ranks N is the single-daemon demo: --nodes 1 --slots N. Every rank allreduces f32\n"
    "tensors from --min-bytes (default 4) to --max-bytes (default 64M) across all\n"
    "nodes x slots ranks, in shared-memory buffers; every element is checked. Rank 0\n"
    "prints time, algbw and busbw per size (nccl-tests definitions); then node 0's\n"
    "/metrics are shown and the daemons shut down. --iters N fixes the iterations per\n"
    "size (default: adaptive). Other ranks' lines, if any, begin with '[rank R] '.\n";

void show_metrics(const std::string& host_port) {
  if (host_port.empty()) return;
  const std::string url = "http://" + host_port + "/metrics";
  auto response = http_get(host_port, "/metrics");
  if (!response.ok() || response->status != 200) {
    std::printf("# metrics: %s (could not read it: %s)\n", url.c_str(),
                response.ok() ? "bad status" : response.status().message().c_str());
    return;
  }
  std::printf("#\n# Node 0's daemon served Prometheus metrics at %s ; a few of them:\n", url.c_str());
  std::istringstream lines(response->body);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("ringsync_collectives_total", 0) == 0 ||
        line.rfind("ringsync_collective_bytes_total", 0) == 0 ||
        line.rfind("ringsync_bus_bandwidth_bytes_per_second", 0) == 0 ||
        line.rfind("ringsync_staged_bytes_total", 0) == 0)
      std::printf("#   %s\n", line.c_str());
  }
}

}  // namespace

int demo(const std::vector<std::string>& args, const std::string& self) {
  if (flag(args, "--help") || flag(args, "-h")) {
    std::cout << kHelp;
    return 0;
  }
  int nodes = 2, slots = 2;
  if (auto v = option(args, "--nodes")) nodes = std::atoi(v->c_str());
  if (auto v = option(args, "--slots")) slots = std::atoi(v->c_str());
  if (auto v = option(args, "--ranks")) {
    if (option(args, "--nodes") || option(args, "--slots")) {
      std::cerr << "ringsync demo: --ranks N means --nodes 1 --slots N; give one form or the other\n";
      return 2;
    }
    nodes = 1;
    slots = std::atoi(v->c_str());
  }
  std::uint64_t min_bytes = 4, max_bytes = 64ull << 20;
  if (!bytes_option(args, "--min-bytes", min_bytes) || !bytes_option(args, "--max-bytes", max_bytes))
    return 2;
  if (nodes < 1 || slots < 1 || nodes * slots > kMaxDemoRanks || min_bytes < 4 || max_bytes < min_bytes) {
    std::cerr << "ringsync demo: need 1 to " << kMaxDemoRanks
              << " ranks (--nodes x --slots, both at least 1) and 4 <= --min-bytes <= --max-bytes\n";
    return 2;
  }
  const std::string iters = option(args, "--iters").value_or("0");

  LaunchPlan plan;
  plan.tool = "ringsync demo";
  plan.raw_stdout_rank = 0;  // its table is the demo's output
  plan.default_daemon_args = {"--log-level", "warn"};
  plan.options.nodes = nodes;
  plan.options.slots = slots;
  plan.options.job_id = "demo";
  plan.options.timeout = std::chrono::minutes(30);
  plan.options.command = {self,        "demo-rank", "--min-bytes", std::to_string(min_bytes), "--max-bytes",
                          std::to_string(max_bytes), "--iters", iters};

  LaunchHooks hooks;
  hooks.daemons_ready = [&](const NodeDaemons& daemons) {
    std::printf("# ringsync demo: %d node(s) x %d slot(s) = %d ranks on this machine, one ringsyncd "
                "per node\n", nodes, slots, nodes * slots);
    for (int i = 0; i < daemons.size(); ++i)
      std::printf("# ringsyncd started for node %d (pid %d), socket %s\n", i,
                  static_cast<int>(daemons.pid(i)), daemons.socket(i).c_str());
    std::fflush(stdout);
  };
  hooks.ranks_done = [&](const NodeDaemons& daemons, int) {
    show_metrics(daemons.metrics(0));
    std::fflush(stdout);
  };
  hooks.daemons_stopped = [&](bool clean) {
    std::printf("# ringsyncd %s (%d node(s))\n", clean ? "shut down cleanly" : "did not shut down cleanly",
                nodes);
    std::fflush(stdout);
  };
  const int status = run_launch(plan, self, hooks);
  if (status != 0) std::cerr << "ringsync demo: FAILED (exit status " << status << ")\n";
  return status;
}

}  // namespace ringsync::cli
