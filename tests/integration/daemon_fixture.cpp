#include "daemon_fixture.h"

#include "common/http_get.h"

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <stdexcept>
#include <thread>

namespace ringsync::test {

DaemonFixture::DaemonFixture(std::vector<std::string> extra_flags) {
  socket_ = dir_.file("ringsyncd.sock");
  log_path_ = dir_.file("ringsyncd.log");
  const std::string ready = dir_.file("ready");
  std::vector<std::string> argv = {bin("ringsyncd"), "--socket", socket_, "--metrics-address",
                                   "127.0.0.1:0", "--ready-file", ready, "--log-level", "debug"};
  argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
  process_ = spawn(argv, {}, log_path_);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    const std::string text = read_file(ready);
    const auto pos = text.find("metrics=");
    if (pos != std::string::npos) {
      metrics_ = text.substr(pos + 8, text.find('\n', pos) - pos - 8);
      break;
    }
    if (!process_.running())
      throw std::runtime_error("ringsyncd exited during start-up:\n" + log());
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error("ringsyncd did not become ready in 30 s:\n" + log());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

DaemonFixture::~DaemonFixture() {
  if (!stopped_) stop();
}

bool DaemonFixture::stop() {
  stopped_ = true;
  process_.signal(SIGTERM);
  auto st = process_.wait(std::chrono::seconds(20));
  if (!st) {
    process_.signal(SIGKILL);
    return false;
  }
  return WIFEXITED(*st) && WEXITSTATUS(*st) == 0;
}

std::map<std::string, std::string> DaemonFixture::rank_env(int rank, int size,
                                                           const std::string& job) const {
  return {{"RINGSYNC_SOCKET", socket_},
          {"RINGSYNC_LOCAL_RANK", std::to_string(rank)},
          {"RINGSYNC_LOCAL_SIZE", std::to_string(size)},
          {"RINGSYNC_JOB_ID", job}};
}

std::string http_get(const std::string& host_port, const std::string& path) {
  auto response = ringsync::http_get(host_port, path);
  if (!response.ok()) return "";
  return response->headers + "\r\n\r\n" + response->body;
}

std::pair<int, std::string> run_command(const std::string& command) {
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return {-1, "popen failed"};
  std::string out;
  char buf[4096];
  while (std::fgets(buf, sizeof(buf), pipe)) out += buf;
  const int st = ::pclose(pipe);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

}  // namespace ringsync::test
