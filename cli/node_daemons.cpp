#include "cli/node_daemons.h"

#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "cli/exit_status.h"
#include "common/loopback_port.h"

namespace ringsync::cli {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Value of `key=` in a ready file, or "".
std::string ready_value(const std::string& text, const std::string& key) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(key + "=", 0) == 0) return line.substr(key.size() + 1);
  return "";
}

// Settings in the environment that would bend every daemon the same way
// (one control address for all, a host list that conflicts with --hostfile).
const std::vector<std::string> kRemovedEnv = {"RINGSYNC_HOSTS", "RINGSYNC_CONTROL_ADDRESS"};

}  // namespace

std::string random_job_token() {
  unsigned char bytes[16] = {};
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  if (!urandom.read(reinterpret_cast<char*>(bytes), sizeof bytes)) {
    std::random_device rd;
    for (auto& b : bytes) b = static_cast<unsigned char>(rd());
  }
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

std::string NodeDaemons::log_path(int node) const {
  return (spec_.log_dir / ("node-" + std::to_string(node) + ".log")).string();
}

std::string NodeDaemons::log_tail(int node, int max_lines) const {
  std::ifstream in(log_path(node), std::ios::binary | std::ios::ate);
  if (!in) return "[node " + std::to_string(node) + " ringsyncd] (no log at " + log_path(node) + ")\n";
  const std::streamoff size = in.tellg();
  const std::streamoff start = std::max<std::streamoff>(0, size - 16384);
  in.seekg(start);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> lines;
  std::istringstream split(text);
  for (std::string line; std::getline(split, line);) lines.push_back(line);
  if (start > 0 && !lines.empty()) lines.erase(lines.begin());  // cut mid-line
  const std::size_t first = lines.size() > static_cast<std::size_t>(max_lines) ? lines.size() - max_lines : 0;
  std::string out;
  for (std::size_t i = first; i < lines.size(); ++i)
    out += "[node " + std::to_string(node) + " ringsyncd] " + lines[i] + "\n";
  if (lines.empty()) out = "[node " + std::to_string(node) + " ringsyncd] (its log is empty)\n";
  return out;
}

Result<NodeDaemons> NodeDaemons::start(const DaemonSpec& spec, const std::function<bool()>& should_stop) {
  Status first_failure;
  for (int attempt = 0; attempt < 2; ++attempt) {
    NodeDaemons d;
    d.spec_ = spec;
    // Another process may take a port before its daemon binds it: this
    // loop's second attempt picks again.
    auto ports = free_loopback_ports(spec.nodes);
    if (!ports.ok()) return ports.status();
    const fs::path hostfile = spec.run_dir / "hostfile";
    {
      std::ofstream out(hostfile);
      out << "# ringsync launch: " << spec.nodes << " simulated node(s) on this machine\n";
      for (auto port : *ports) out << "127.0.0.1:" << port << " slots=" << spec.slots << "\n";
      if (!out) return Status::Internal("cannot write " + hostfile.string());
    }
    const std::string token = random_job_token();
    Status failure;
    for (int i = 0; i < spec.nodes && failure.ok(); ++i) {
      Node node;
      const std::string name = "node-" + std::to_string(i);
      node.socket = (spec.run_dir / (name + ".sock")).string();
      node.ready_file = (spec.run_dir / (name + ".ready")).string();
      std::error_code ec;
      fs::remove(node.ready_file, ec);
      fs::remove(node.socket, ec);
      fs::remove(d.log_path(i), ec);
      std::vector<std::string> argv = {spec.program,       "--node-rank",       std::to_string(i),
                                       "--hostfile",       hostfile.string(),   "--socket",
                                       node.socket,        "--metrics-address", "127.0.0.1:0",
                                       "--ready-file",     node.ready_file,     "--job-id",
                                       spec.job_id};
      // Simulated nodes share this machine: UCX left to choose would link them by
      // shared memory, and the job would not exercise the network path a real
      // cluster takes. TCP it is (a --daemon-arg --ucx-transports comes later and wins).
      if (spec.nodes > 1) argv.insert(argv.end(), {"--ucx-transports", "tcp,self"});
      argv.insert(argv.end(), spec.extra_args.begin(), spec.extra_args.end());
      SpawnOptions options;
      // In the environment, not on the command line, where any user could read it.
      options.extra_env = {{"RINGSYNC_JOB_TOKEN", token}};
      options.remove_env = kRemovedEnv;
      options.log_path = d.log_path(i);
      options.null_stdin = true;
      options.own_process_group = true;    // Ctrl-C reaches the launcher, which stops trainers first
      options.parent_death_signal = SIGTERM;
      auto child = Child::start_with(argv, options);
      if (!child.ok())
        return Status::InvalidArgument(child.status().message() +
                                       " (set RINGSYNC_DAEMON to the ringsyncd program to use)");
      node.process = std::move(child).value();
      d.nodes_.push_back(std::move(node));
    }

    // Wait until every daemon has written its ready file (tmp + rename: complete
    // once it exists).
    const auto deadline = std::chrono::steady_clock::now() + spec.ready_timeout;
    std::vector<bool> ready(spec.nodes, false);
    int waiting = spec.nodes;
    while (waiting > 0 && failure.ok()) {
      for (int i = 0; i < spec.nodes && failure.ok(); ++i) {
        if (ready[i]) continue;
        Node& node = d.nodes_[i];
        if (fs::exists(node.ready_file)) {
          const std::string text = slurp(node.ready_file);
          node.metrics = ready_value(text, "metrics");
          if (node.metrics == "off") node.metrics.clear();
          ready[i] = true;
          --waiting;
        } else if (auto st = node.process.wait(0ms)) {
          node.reported = true;
          failure = Status::Internal("node " + std::to_string(i) + "'s ringsyncd " + describe_exit(*st) +
                                     " during start-up; the end of its log (" + d.log_path(i) + "):\n" +
                                     d.log_tail(i));
        }
      }
      if (!failure.ok() || waiting == 0) break;
      if (should_stop && should_stop()) {
        d.stop(5s);
        return Status::Closed("stopped during start-up");
      }
      if (std::chrono::steady_clock::now() > deadline) {
        int late = 0;
        while (ready[late]) ++late;
        const std::string why = "node " + std::to_string(late) + "'s ringsyncd did not write its ready file " +
                                "within " + std::to_string(spec.ready_timeout.count()) +
                                "s; the end of its log (" + d.log_path(late) + "):\n" + d.log_tail(late);
        d.stop(5s);
        return Status::Timeout(why);
      }
      std::this_thread::sleep_for(10ms);
    }
    if (failure.ok()) {
      if (Status recorded = d.record_metrics_addresses(); !recorded.ok()) {
        d.stop(5s);
        return recorded;
      }
      return d;
    }
    d.stop(5s);
    if (attempt == 0) {
      first_failure = failure;
      continue;
    }
    return Status::Internal(failure.message() +
                            "(a first start had failed too; this was the second, on new ports)");
  }
  return first_failure;
}

Status NodeDaemons::record_metrics_addresses() const {
  std::string text = "# ringsync launch: the daemons' metrics addresses (ringsync top --launch-dir DIR)\n";
  for (const auto& node : nodes_)
    if (!node.metrics.empty()) text += node.metrics + "\n";
  for (const fs::path& dir : {spec_.run_dir, spec_.log_dir}) {
    // Whole or not at all for a reader: written aside, then renamed into place.
    const fs::path file = dir / kMetricsAddressesFile;
    const fs::path partial = dir / (std::string(kMetricsAddressesFile) + ".partial");
    std::ofstream(partial) << text;
    std::error_code ec;
    fs::rename(partial, file, ec);
    if (ec) return Status::Internal("cannot write " + file.string() + ": " + ec.message());
  }
  return Status::Ok();
}

std::vector<std::pair<int, int>> NodeDaemons::newly_exited() {
  std::vector<std::pair<int, int>> out;
  for (int i = 0; i < size(); ++i) {
    Node& node = nodes_[i];
    if (node.reported) continue;
    if (auto st = node.process.wait(0ms)) {
      node.reported = true;
      out.emplace_back(i, *st);
    }
  }
  return out;
}

std::vector<NodeDaemons::Unclean> NodeDaemons::stop(std::chrono::milliseconds grace) {
  if (!nodes_.empty()) {
    std::error_code ec;
    fs::remove(spec_.log_dir / kMetricsAddressesFile, ec);  // they will not answer there any more
  }
  for (auto& node : nodes_) node.process.signal(SIGTERM);
  std::vector<Unclean> unclean;
  const auto deadline = std::chrono::steady_clock::now() + grace;
  for (int i = 0; i < size(); ++i) {
    Node& node = nodes_[i];
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    auto st = node.process.wait(std::max(left, 0ms));
    if (!st) {
      node.process.signal(SIGKILL);
      node.process.wait(5s);
      if (!node.reported) {
        const auto secs = std::chrono::duration_cast<std::chrono::seconds>(grace).count();
        unclean.push_back({i, "did not exit within " + std::to_string(secs) + "s of SIGTERM (killed)"});
      }
    } else if (!node.reported && !(WIFEXITED(*st) && WEXITSTATUS(*st) == 0)) {
      unclean.push_back({i, describe_exit(*st)});
    }
    node.reported = true;
  }
  return unclean;
}

}  // namespace ringsync::cli
