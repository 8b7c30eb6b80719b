// A real ringsyncd for one test: private socket, ephemeral metrics port, its
// log captured; stopped with SIGTERM at the end (and checked to exit cleanly).
#pragma once

#include <string>
#include <vector>

#include "process.h"

namespace ringsync::test {

class DaemonFixture {
 public:
  explicit DaemonFixture(std::vector<std::string> extra_flags = {});
  ~DaemonFixture();

  const std::string& socket() const { return socket_; }
  const std::string& metrics_host_port() const { return metrics_; }  // "127.0.0.1:PORT"
  std::string log() const { return read_file(log_path_); }
  bool running() { return process_.running(); }
  pid_t pid() const { return process_.pid(); }
  // SIGTERM and wait; true when it exited 0.
  bool stop();
  // Environment for a rank process of job `job`.
  std::map<std::string, std::string> rank_env(int rank, int size,
                                              const std::string& job = "test") const;
  const TempDir& dir() const { return dir_; }

 private:
  TempDir dir_;
  std::string socket_;
  std::string metrics_;
  std::string log_path_;
  Child process_;
  bool stopped_ = false;
};

// GET http://host:port/path over a plain socket; returns the whole response.
std::string http_get(const std::string& host_port, const std::string& path);
// Runs a shell command, returns its exit code and combined output.
std::pair<int, std::string> run_command(const std::string& command);

}  // namespace ringsync::test
