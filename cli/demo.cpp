// ringsync demo: the main job on one machine with no configuration.
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "cli/commands.h"
#include "cli/options.h"
#include "common/http_get.h"
#include "common/subprocess.h"

namespace ringsync::cli {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const char* kHelp =
    "usage: ringsync demo [--ranks N] [--min-bytes B] [--max-bytes B] [--iters N]\n\n"
    "Starts a ringsyncd daemon and N trainer processes (default 4) on this machine,\n"
    "allreduces f32 tensors from --min-bytes (default 4) to --max-bytes (default 64M)\n"
    "in shared-memory buffers, checks every element, prints time, algbw and busbw per\n"
    "size (nccl-tests definitions), shows the daemon's /metrics, and shuts down.\n";

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Value of `key=` in the daemon's ready file, or "".
std::string ready_value(const std::string& text, const std::string& key) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(key + "=", 0) == 0) return line.substr(key.size() + 1);
  return "";
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "ringsync-demo-XXXXXX").string();
    if (::mkdtemp(tmpl.data())) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void show_metrics(const std::string& host_port) {
  const std::string url = "http://" + host_port + "/metrics";
  auto response = http_get(host_port, "/metrics");
  if (!response.ok() || response->status != 200) {
    std::printf("# metrics: %s (could not read it: %s)\n", url.c_str(),
                response.ok() ? "bad status" : response.status().message().c_str());
    return;
  }
  std::printf("#\n# The daemon served Prometheus metrics at %s ; a few of them:\n", url.c_str());
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
  int ranks = 4;
  if (auto v = option(args, "--ranks")) ranks = std::atoi(v->c_str());
  std::uint64_t min_bytes = 4, max_bytes = 64ull << 20;
  if (!bytes_option(args, "--min-bytes", min_bytes) || !bytes_option(args, "--max-bytes", max_bytes))
    return 2;
  if (ranks < 1 || ranks > 64 || min_bytes < 4 || max_bytes < min_bytes) {
    std::cerr << "ringsync demo: need 1 <= --ranks <= 64 and 4 <= --min-bytes <= --max-bytes\n";
    return 2;
  }
  const std::string iters = option(args, "--iters").value_or("0");

  TempDir dir;
  if (dir.path().empty()) {
    std::cerr << "ringsync demo: cannot create a temporary directory\n";
    return 1;
  }
  const fs::path bin_dir = fs::path(self).parent_path();
  const std::string socket = (dir.path() / "ringsyncd.sock").string();
  const fs::path ready = dir.path() / "ready";
  const fs::path daemon_log = dir.path() / "ringsyncd.log";
  auto daemon = Child::start({(bin_dir / "ringsyncd").string(), "--socket", socket,
                              "--metrics-address", "127.0.0.1:0", "--ready-file", ready.string(),
                              "--log-level", "warn"},
                             {}, daemon_log.string());
  if (!daemon.ok()) {
    std::cerr << "ringsync demo: " << daemon.status().message()
              << " (ringsyncd is expected next to this program)\n";
    return 1;
  }
  std::string metrics;
  for (auto deadline = std::chrono::steady_clock::now() + 20s; metrics.empty();) {
    metrics = ready_value(slurp(ready), "metrics");
    if (!metrics.empty()) break;
    if (!daemon->running() || std::chrono::steady_clock::now() > deadline) {
      std::cerr << "ringsync demo: the daemon did not start:\n" << slurp(daemon_log);
      return 1;
    }
    std::this_thread::sleep_for(10ms);
  }
  std::printf("# ringsyncd started (pid %d), socket %s\n", daemon->pid(), socket.c_str());
  std::fflush(stdout);

  std::vector<Child> children;
  for (int r = 0; r < ranks; ++r) {
    auto child = Child::start(
        {self, "demo-rank", "--min-bytes", std::to_string(min_bytes), "--max-bytes",
         std::to_string(max_bytes), "--iters", iters},
        {{"RINGSYNC_SOCKET", socket},
         {"RINGSYNC_JOB_ID", "demo"},
         {"RINGSYNC_LOCAL_RANK", std::to_string(r)},
         {"RINGSYNC_LOCAL_SIZE", std::to_string(ranks)}},
        r == 0 ? "" : (dir.path() / ("rank" + std::to_string(r) + ".log")).string());
    if (!child.ok()) {
      std::cerr << "ringsync demo: " << child.status().message() << "\n";
      return 1;
    }
    children.push_back(std::move(child).value());
  }
  int failed = 0;
  for (int r = 0; r < ranks; ++r) {
    if (children[r].succeeded(30min)) continue;
    ++failed;
    std::cerr << "ringsync demo: rank " << r << " failed";
    if (r > 0) std::cerr << ":\n" << slurp(dir.path() / ("rank" + std::to_string(r) + ".log"));
    std::cerr << "\n";
    for (auto& c : children) c.signal(SIGTERM);
  }
  show_metrics(metrics);

  daemon->signal(SIGTERM);
  auto status = daemon->wait(20s);
  const bool clean = status && WIFEXITED(*status) && WEXITSTATUS(*status) == 0;
  std::printf("# ringsyncd %s\n", clean ? "shut down cleanly" : "did not shut down cleanly");
  if (!clean) std::cerr << slurp(daemon_log);
  if (failed) std::cerr << "ringsync demo: FAILED (" << failed << " rank(s))\n";
  return failed || !clean ? 1 : 0;
}

}  // namespace ringsync::cli
