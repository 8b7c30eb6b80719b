#include "etcd_server.h"

#include <unistd.h>

#include <csignal>
#include <stdexcept>
#include <thread>

#include "daemon_fixture.h"

namespace ringsync::test {

using namespace std::chrono_literals;

namespace {

constexpr const char* kEtcd = "/usr/bin/etcd";
constexpr const char* kEtcdctl = "/usr/bin/etcdctl";

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

std::string EtcdServer::unavailable_reason() {
  if (::access(kEtcd, X_OK) != 0) return std::string(kEtcd) + " is missing: install etcd-server (scripts/install-deps.sh)";
  return "";
}

EtcdServer::EtcdServer(const std::string& host, int client_port, int peer_port, const std::vector<std::string>& launcher)
    : host_(host), port_(client_port), launcher_(launcher), log_(dir_.file("etcd.log")) {
  const std::string client = "http://" + host + ":" + std::to_string(client_port);
  const std::string peer = "http://" + host + ":" + std::to_string(peer_port);
  std::vector<std::string> argv = launcher;
  const std::vector<std::string> etcd = {kEtcd,
                                         "--name", "test",
                                         "--data-dir", dir_.file("data"),
                                         "--listen-client-urls", client,
                                         "--advertise-client-urls", client,
                                         "--listen-peer-urls", peer,
                                         "--initial-advertise-peer-urls", peer,
                                         "--initial-cluster", "test=" + peer,
                                         "--log-level", "warn"};
  argv.insert(argv.end(), etcd.begin(), etcd.end());
  process_ = spawn(argv, {}, log_);
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  for (;;) {
    // Asked with etcd's own client, from where etcd runs (a netns host's
    // addresses are not reachable from outside it).
    if (ctl("endpoint health").first == 0) return;
    if (!process_.running()) throw std::runtime_error("etcd exited during start-up:\n" + log());
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error("etcd did not answer in 30 s:\n" + log());
    std::this_thread::sleep_for(50ms);
  }
}

EtcdServer::~EtcdServer() {
  if (!process_.running()) return;
  process_.signal(SIGCONT);
  process_.signal(SIGTERM);
  if (!process_.wait(10s)) process_.signal(SIGKILL);
  process_.wait(5s);
}

std::string EtcdServer::url() const { return "etcd://" + host_ + ":" + std::to_string(port_); }

void EtcdServer::pause() { process_.signal(SIGSTOP); }
void EtcdServer::resume() { process_.signal(SIGCONT); }

void EtcdServer::kill() {
  process_.signal(SIGKILL);
  process_.wait(10s);
}

std::pair<int, std::string> EtcdServer::ctl(const std::string& arguments) const {
  std::string prefix;
  for (const auto& part : launcher_) prefix += shell_quote(part) + " ";
  return run_command(prefix + kEtcdctl + " --dial-timeout=2s --endpoints=" + host_ + ":" + std::to_string(port_) + " " +
                     arguments + " 2>&1");
}

std::string EtcdServer::get(const std::string& key) const {
  auto [code, out] = ctl("get --print-value-only " + shell_quote(key));
  if (code != 0) return "";
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

bool EtcdServer::put(const std::string& key, const std::string& value) const {
  return ctl("put " + shell_quote(key) + " " + shell_quote(value)).first == 0;
}

}  // namespace ringsync::test
