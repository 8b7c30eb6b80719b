#include "cluster_fixture.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "daemon_fixture.h"

namespace ringsync::test {

using namespace std::chrono_literals;

std::uint16_t free_loopback_port() {
  // Below Linux's ephemeral range (32768-60999 by default): a port the kernel
  // hands out to any outgoing connection of a test running beside this one
  // could be taken between this probe and the daemon's bind. Random, so that
  // tests starting together rarely pick alike; bound here to check it is free.
  static std::mt19937 pick(std::random_device{}());
  for (int attempt = 0; attempt < 200; ++attempt) {
    const auto port = static_cast<std::uint16_t>(std::uniform_int_distribution<int>(20000, 32767)(pick));
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw std::runtime_error("socket() failed");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    ::close(fd);
    if (free) return port;
  }
  throw std::runtime_error("cannot find a free loopback port in 20000-32767");
}

namespace {


// Exit code, 128 + signal, from a raw wait status.
int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

std::string unique_token() {
  static std::atomic<int> counter{0};
  return "token-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

}  // namespace

ClusterFixture::ClusterFixture(ClusterOptions options) : options_(std::move(options)) {
  if (options_.nodes < 1 || options_.local_size < 1)
    throw std::invalid_argument("a cluster needs at least one node and one slot");
  token_ = unique_token();
  nodes_.resize(options_.nodes);
  std::set<std::uint16_t> taken;
  std::ostringstream hostfile;
  for (int i = 0; i < options_.nodes; ++i) {
    Node& node = nodes_[i];
    if (!options_.places.empty()) node.place = options_.places.at(i);
    while (node.place.port == 0 || (options_.places.empty() && taken.count(node.place.port)))
      node.place.port = free_loopback_port();
    taken.insert(node.place.port);
    node.socket = dir_.file("node" + std::to_string(i) + ".sock");
    node.ready = dir_.file("node" + std::to_string(i) + ".ready");
    hostfile << node.place.host << ":" << node.place.port << " slots=" << options_.local_size
             << "\n";
  }
  hostfile_ = dir_.file("hostfile");
  std::ofstream(hostfile_) << hostfile.str();
  // Start every node before waiting for any: a ready file only says that node
  // listens, and nodes started together form their ring sooner.
  for (int i = 0; i < options_.nodes; ++i) start_node(i);
  for (int i = 0; i < options_.nodes; ++i) wait_ready(i);
}

ClusterFixture::~ClusterFixture() {
  for (auto& node : nodes_) {
    if (node.state == State::kPaused) node.process.signal(SIGCONT);
    node.process.signal(SIGTERM);
  }
  for (auto& node : nodes_) {
    if (!node.process.wait(10s)) node.process.signal(SIGKILL);
    node.process.wait(5s);
  }
}

std::string ClusterFixture::control_address(int node) const {
  const auto& place = nodes_[node].place;
  return place.host + ":" + std::to_string(place.port);
}

void ClusterFixture::start_node(int i) {
  Node& node = nodes_[i];
  const std::string log =
      dir_.file("node" + std::to_string(i) + ".run" + std::to_string(node.logs.size()) + ".log");
  node.logs.push_back(log);
  std::filesystem::remove(node.ready);
  std::vector<std::string> argv = node.place.launcher;
  std::vector<std::string> daemon = {bin("ringsyncd"),
                                     "--socket", node.socket,
                                     "--metrics-address", "127.0.0.1:0",
                                     "--ready-file", node.ready,
                                     "--log-level", "debug",
                                     "--control-address", control_address(i),
                                     "--heartbeat-interval", "100ms",
                                     "--peer-timeout", "1s",
                                     // Ranks that disagree fail in seconds, not minutes.
                                     "--collective-timeout", "30s",
                                     // Simulated nodes: the network path, as ringsync launch pins it.
                                     "--ucx-transports", "tcp,self"};
  // Nodes on this host's loopback: their data too, whatever other interfaces
  // (bridges, containers' veths) the machine has up. Later flags override it.
  if (node.place.launcher.empty() && node.place.host == "127.0.0.1")
    daemon.insert(daemon.end(), {"--ucx-net-devices", "lo"});
  if (!options_.service) {
    const std::vector<std::string> job = {"--hostfile", hostfile_, "--node-rank", std::to_string(i),
                                          "--job-id", options_.job_id, "--job-token", token_};
    daemon.insert(daemon.end(), job.begin(), job.end());
  }
  argv.insert(argv.end(), daemon.begin(), daemon.end());
  argv.insert(argv.end(), options_.extra_flags.begin(), options_.extra_flags.end());
  argv.insert(argv.end(), node.place.flags.begin(), node.place.flags.end());
  node.process = spawn(argv, options_.daemon_env, log);
  node.state = State::kRunning;
}

void ClusterFixture::wait_ready(int i) {
  Node& node = nodes_[i];
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  for (;;) {
    const std::string text = read_file(node.ready);
    const auto pos = text.find("metrics=");
    if (pos != std::string::npos) {
      node.metrics = text.substr(pos + 8, text.find('\n', pos) - pos - 8);
      return;
    }
    const std::string who = "ringsyncd node " + std::to_string(i);
    if (!node.process.running())
      throw std::runtime_error(who + " exited during start-up:\n" + logs());
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error(who + " did not become ready in 30 s:\n" + logs());
    std::this_thread::sleep_for(10ms);
  }
}

std::string ClusterFixture::peer_transports(int node, int peer) const {
  std::string prefix = "ringsync_peer_transports_info{job_id=\"";
  prefix += options_.job_id;
  prefix += "\",peer=\"" + std::to_string(peer) + "\",";
  const std::string text = metrics(node);
  const auto at = text.find(prefix);
  if (at == std::string::npos) return "";
  const std::string label = "transports=\"";
  const auto in_line = text.find(label, at);
  if (in_line == std::string::npos || in_line > text.find('\n', at)) return "";
  const auto start = in_line + label.size();
  return text.substr(start, text.find('"', start) - start);
}

std::string ClusterFixture::metrics(int node) const {
  if (nodes_[node].metrics.empty()) return "";
  return http_get(nodes_[node].metrics, "/metrics");
}

std::string ClusterFixture::log(int node) const {
  std::string text;
  for (const auto& path : nodes_[node].logs) text += read_file(path);
  return text;
}

std::string ClusterFixture::logs(std::size_t tail_bytes) const {
  std::string text;
  for (int i = 0; i < nodes(); ++i)
    text += "----- ringsyncd node " + std::to_string(i) + " -----\n" + tail(log(i), tail_bytes);
  return text;
}

bool ClusterFixture::running(int node) { return nodes_[node].process.running(); }

void ClusterFixture::signal(int i, int sig) {
  Node& node = nodes_[i];
  node.process.signal(sig);
  if (sig == SIGSTOP) node.state = State::kPaused;
  if (sig == SIGCONT && node.state == State::kPaused) node.state = State::kRunning;
  if (sig == SIGKILL) {
    node.process.wait(10s);
    node.state = State::kKilled;
  }
}

void ClusterFixture::restart(int i) {
  Node& node = nodes_[i];
  if (node.process.running()) {
    if (node.state == State::kPaused) node.process.signal(SIGCONT);
    node.process.signal(SIGKILL);
    node.process.wait(10s);
  }
  start_node(i);
  wait_ready(i);
}

bool ClusterFixture::stop(int i) {
  Node& node = nodes_[i];
  if (node.state == State::kPaused) node.process.signal(SIGCONT);
  node.process.signal(SIGTERM);
  auto status = node.process.wait(20s);
  node.state = State::kStopped;
  if (!status) {
    node.process.signal(SIGKILL);
    node.process.wait(5s);
    return false;
  }
  return WIFEXITED(*status) && WEXITSTATUS(*status) == 0;
}

std::string ClusterFixture::stop_all() {
  std::string problems;
  for (int i = 0; i < nodes(); ++i) {
    if (nodes_[i].state == State::kKilled) continue;
    const bool was_running = nodes_[i].process.running();
    if (!stop(i))
      problems += "node " + std::to_string(i) +
                  (was_running ? " did not exit 0 on SIGTERM\n" : " had already exited\n");
  }
  return problems;
}

std::string ClusterFixture::node_list() const {
  std::string list;
  for (int i = 0; i < nodes(); ++i) {
    if (i > 0) list += ',';
    list += control_address(i);
  }
  return list;
}

ClusterFixture::JobRun ClusterFixture::default_job() const {
  return JobRun{options_.job_id, options_.local_size, token_ + "-" + options_.job_id};
}

std::map<std::string, std::string> ClusterFixture::rank_env(int node, int local_rank, const JobRun& job) const {
  std::map<std::string, std::string> env = {
      {"RINGSYNC_SOCKET", socket(node)},
      {"RINGSYNC_JOB_ID", job.job_id},
      {"RINGSYNC_LOCAL_RANK", std::to_string(local_rank)},
      {"RINGSYNC_LOCAL_SIZE", std::to_string(job.local_size)},
      {"RINGSYNC_TEST_ID", std::to_string(node * job.local_size + local_rank)}};
  if (!job.rendezvous && !job.one_node) {
    env["RINGSYNC_RANK"] = std::to_string(node * job.local_size + local_rank);
    env["RINGSYNC_SIZE"] = std::to_string(nodes() * job.local_size);
  }
  if (options_.service) {
    env["RINGSYNC_JOB_TOKEN"] = job.token;
    if (job.one_node) {
      env["RINGSYNC_NUM_NODES"] = "1";
    } else if (job.rendezvous) {
      env["RINGSYNC_NUM_NODES"] = std::to_string(nodes());
    } else {
      env["RINGSYNC_NODES"] = node_list();
      env["RINGSYNC_NODE_RANK"] = std::to_string(node);
    }
  }
  return env;
}

RankGroup::RankGroup(ClusterFixture& cluster, const std::string& tag)
    : RankGroup(cluster, tag, cluster.default_job()) {}

RankGroup::RankGroup(ClusterFixture& cluster, const std::string& tag, ClusterFixture::JobRun job)
    : cluster_(cluster), job_(std::move(job)), dir_(cluster.dir().file(tag)) {
  std::filesystem::create_directories(dir_);
}

std::string RankGroup::error_of(int index) const {
  const std::string text = read_file(ranks_.at(index).log);
  const std::string marker = ": peer lost: ";
  const auto at = text.find(marker);
  if (at == std::string::npos) return "";
  const auto start = at + marker.size();
  return text.substr(start, text.find('\n', start) - start);
}

namespace {
// A collective submitted after the job broke reads the same verdict with
// "(job 'J' cannot run collectives any more: restart its ranks)" after it
// (docs/cluster.md); whether a rank's last collective was in flight or came
// later is a race, so the verdicts are compared without that suffix.
std::string verdict_of(std::string error) {
  static const std::string kTail = " cannot run collectives any more: restart its ranks)";
  const auto at = error.rfind(" (job '");
  if (at != std::string::npos && error.size() >= kTail.size() &&
      error.compare(error.size() - kTail.size(), kTail.size(), kTail) == 0)
    error.erase(at);
  return error;
}
}  // namespace

std::string RankGroup::same_error(const std::vector<int>& which, const std::vector<std::string>& words) const {
  std::string problems;
  const std::string first = which.empty() ? "" : verdict_of(error_of(which.front()));
  for (int i : which) {
    const std::string error = verdict_of(error_of(i));
    if (error != first) problems += "rank index " + std::to_string(i) + " says '" + error + "', not '" + first + "'\n";
    for (const auto& w : words)
      if (error.find(w) == std::string::npos)
        problems += "rank index " + std::to_string(i) + ": '" + error + "' lacks '" + w + "'\n";
  }
  return problems;
}

void RankGroup::signal(int index, int sig) {
  Rank& rank = ranks_.at(index);
  rank.process.signal(sig);
  if (sig == SIGKILL) rank.process.wait(10s);
}

void RankGroup::start(int node, int local_rank, const std::vector<std::string>& scenario) {
  start_with_env(node, local_rank, scenario, cluster_.rank_env(node, local_rank, job_));
}

void RankGroup::start_with_env(int node, int local_rank, const std::vector<std::string>& scenario,
                               std::map<std::string, std::string> env) {
  std::vector<std::string> program = {bin("ringsync-test-rank")};
  program.insert(program.end(), scenario.begin(), scenario.end());
  start_program(node, local_rank, program, std::move(env));
}

std::string RankGroup::output(int index) const { return read_file(ranks_.at(index).log); }

void RankGroup::start_program(int node, int local_rank, const std::vector<std::string>& program,
                              std::map<std::string, std::string> env) {
  std::vector<std::string> argv = cluster_.launcher(node);
  argv.insert(argv.end(), program.begin(), program.end());
  env["RINGSYNC_SOCKET"] = cluster_.socket(node);
  env["RINGSYNC_TEST_MARK_DIR"] = dir_;
  // A rank gives up on its own a little before the tests' usual 120 s, saying
  // which collective is still pending, rather than being killed silently.
  env["RINGSYNC_TEST_DEADLINE_S"] = "100";
  Rank rank;
  rank.node = node;
  rank.local_rank = local_rank;
  rank.log = dir_ + "/node" + std::to_string(node) + ".rank" + std::to_string(local_rank) + ".log";
  rank.process = spawn(argv, env, rank.log);
  ranks_.push_back(std::move(rank));
}

void RankGroup::start_all(const std::vector<std::string>& scenario) {
  for (int node = 0; node < cluster_.nodes(); ++node)
    for (int r = 0; r < job_.local_size; ++r) start(node, r, scenario);
}

bool RankGroup::wait_marks(const std::string& what, std::chrono::milliseconds timeout,
                           const std::vector<int>& which) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (int i = 0; i < static_cast<int>(ranks_.size()); ++i) {
    if (!which.empty() && std::find(which.begin(), which.end(), i) == which.end()) continue;
    const Rank& rank = ranks_[i];
    const int global = rank.node * job_.local_size + rank.local_rank;
    const std::string path = dir_ + "/" + what + "." + std::to_string(global);
    while (!std::filesystem::exists(path)) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(5ms);
    }
  }
  return true;
}

std::vector<int> RankGroup::wait(std::chrono::milliseconds timeout, std::vector<int> which) {
  if (which.empty())
    for (int i = 0; i < static_cast<int>(ranks_.size()); ++i) which.push_back(i);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<int> codes;
  for (int i : which) {
    Rank& rank = ranks_.at(i);
    if (!rank.code) {
      const auto left = std::max(std::chrono::steady_clock::duration::zero(),
                                 deadline - std::chrono::steady_clock::now());
      if (auto status = rank.process.wait(
              std::chrono::duration_cast<std::chrono::milliseconds>(left))) {
        rank.code = exit_code(*status);
      } else {
        rank.process.signal(SIGKILL);
        rank.process.wait(5s);
        rank.code = -1;
      }
    }
    codes.push_back(*rank.code);
  }
  return codes;
}

std::vector<int> RankGroup::on_node(int node) const {
  std::vector<int> out;
  for (int i = 0; i < static_cast<int>(ranks_.size()); ++i)
    if (ranks_[i].node == node) out.push_back(i);
  return out;
}

std::vector<int> RankGroup::not_on_node(int node) const {
  std::vector<int> out;
  for (int i = 0; i < static_cast<int>(ranks_.size()); ++i)
    if (ranks_[i].node != node) out.push_back(i);
  return out;
}

std::string RankGroup::report(std::size_t tail_bytes) const {
  std::string text;
  for (const auto& rank : ranks_) {
    text += "node " + std::to_string(rank.node) + " rank " + std::to_string(rank.local_rank) +
            " (global " + std::to_string(rank.node * job_.local_size + rank.local_rank) +
            "): " +
            (!rank.code       ? std::string("not waited for")
             : *rank.code < 0 ? std::string("still running at the deadline, killed")
                              : "exit " + std::to_string(*rank.code)) +
            "\n";
  }
  for (const auto& rank : ranks_)
    text += "----- " + rank.log.substr(dir_.size() + 1) + " -----\n" +
            tail(read_file(rank.log), tail_bytes);
  return text;
}

NodeLossRun hurt_node_mid_loop(ClusterFixture& cluster, RankGroup& ranks, int victim, int sig,
                               const std::function<void()>& between,
                               std::chrono::seconds deadline, const std::string& count) {
  return hurt_node_mid_loop(
      cluster, ranks, victim, [&cluster, victim, sig] { cluster.signal(victim, sig); }, between, deadline, count);
}

NodeLossRun hurt_node_mid_loop(ClusterFixture& /*cluster*/, RankGroup& ranks, int victim,
                               const std::function<void()>& hurt, const std::function<void()>& between,
                               std::chrono::seconds deadline, const std::string& count) {
  NodeLossRun out;
  // The loop's own bound (90 s) outlasts ours, so no rank stops by itself too early.
  std::vector<std::string> loop = {"loop", "90", "node " + std::to_string(victim)};
  if (!count.empty()) loop.push_back(count);
  ranks.start_all(loop);
  out.looping = ranks.wait_marks("looping", 60s);
  if (!out.looping) return out;
  const auto hurt_at = std::chrono::steady_clock::now();
  hurt();
  out.survivors = ranks.wait(deadline, ranks.not_on_node(victim));
  out.survivors_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - hurt_at).count();
  if (between) between();
  out.victims = ranks.wait(deadline, ranks.on_node(victim));
  return out;
}

ClusterOptions cluster_options(int nodes, int local_size, std::vector<std::string> extra) {
  ClusterOptions o;
  o.nodes = nodes;
  o.local_size = local_size;
  o.extra_flags = std::move(extra);
  return o;
}

bool all_running(ClusterFixture& cluster, int except) {
  for (int i = 0; i < cluster.nodes(); ++i)
    if (i != except && !cluster.running(i)) return false;
  return true;
}

std::string find_line(const std::string& log, const std::string& text, const std::regex& pattern) {
  std::istringstream in(log);
  std::string line;
  while (std::getline(in, line))
    if (line.find(text) != std::string::npos && std::regex_search(line, pattern)) return line;
  return "";
}

std::string node_metric_summary(ClusterFixture& cluster, const std::vector<std::string>& names) {
  std::string text;
  for (int i = 0; i < cluster.nodes(); ++i) {
    const std::string metrics = cluster.metrics(i);
    text += "node " + std::to_string(i) + ":";
    for (const auto& name : names) {
      auto v = metric_value(metrics, name);
      text += " " + name + "=" + (v ? std::to_string(*v) : std::string("absent"));
    }
    text += "\n";
  }
  return text;
}

std::string tail(const std::string& text, std::size_t bytes) {
  if (text.size() <= bytes) return text;
  return "[... " + std::to_string(text.size() - bytes) + " bytes cut ...]\n" +
         text.substr(text.size() - bytes);
}

bool all_equal(const std::vector<int>& codes, int want) {
  return std::all_of(codes.begin(), codes.end(), [want](int c) { return c == want; });
}

std::optional<double> metric_value(const std::string& metrics_text, const std::string& name) {
  std::optional<double> sum;
  std::istringstream in(metrics_text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name, 0) != 0 || line.size() <= name.size()) continue;
    const char next = line[name.size()];
    if (next != ' ' && next != '{') continue;
    const auto space = line.find_last_of(' ');
    try {
      sum = sum.value_or(0) + std::stod(line.substr(space + 1));
    } catch (const std::exception&) {
    }
  }
  return sum;
}

bool run_job(ClusterFixture& cluster, const std::string& tag, const std::vector<std::string>& scenario,
             std::chrono::seconds timeout) {
  RankGroup ranks(cluster, tag);
  ranks.start_all(scenario);
  if (all_equal(ranks.wait(timeout), 0)) return true;
  MESSAGE("job '", tag, "' failed:\n", ranks.report(), cluster.logs());
  return false;
}

bool wait_for_ring(ClusterFixture& cluster, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    bool formed = true;
    for (int i = 0; i < cluster.nodes() && formed; ++i)
      formed = metric_value(cluster.metrics(i), "ringsync_ring_nodes") == cluster.nodes();
    if (formed) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(50ms);
  }
}

}  // namespace ringsync::test
