// A ringsyncd on a private socket, for one test: started with `extra` flags,
// ready when the constructor returns, stopped (SIGTERM) by the destructor.
#pragma once

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "common/subprocess.h"
#include "ringsync/ringsync.h"

namespace ringsync::testing {

inline std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class RealDaemon {
 public:
  explicit RealDaemon(std::vector<std::string> extra = {}, std::string job_id = "device-test")
      : job_id_(std::move(job_id)) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp ? tmp : "/tmp") + "/ringsync-daemon-XXXXXX";
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    dir_ = pattern;
    socket_ = dir_ + "/d.sock";
    log_ = dir_ + "/d.log";
    const std::string ready = dir_ + "/ready";
    std::vector<std::string> argv = {std::string(RINGSYNC_BIN_DIR) + "/ringsyncd", "--socket", socket_,
                                     "--metrics-address", "off", "--ready-file", ready, "--log-level", "debug"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto child = Child::start(argv, {}, log_);
    REQUIRE(child.ok());
    child_ = std::move(child).value();
    for (int i = 0; i < 3000 && slurp(ready).find("socket=") == std::string::npos; ++i) {
      REQUIRE(child_.running());
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    REQUIRE(slurp(ready).find("socket=") != std::string::npos);
  }
  ~RealDaemon() {
    child_.signal(SIGTERM);
    child_.wait(std::chrono::seconds(20));
    std::remove(log_.c_str());
    std::remove((dir_ + "/ready").c_str());
    std::remove(socket_.c_str());
    ::rmdir(dir_.c_str());
  }
  RealDaemon(const RealDaemon&) = delete;
  RealDaemon& operator=(const RealDaemon&) = delete;

  bool running() { return child_.running(); }
  std::string log() const { return slurp(log_); }

  // One rank of a job of this node alone, on this daemon.
  rs_config_t config(int local_rank = 0, int local_size = 1) const {
    rs_config_t c;
    rs_config_init(&c);
    c.socket_path = socket_.c_str();
    c.job_id = job_id_.c_str();
    c.local_rank = local_rank;
    c.local_size = local_size;
    c.connect_timeout_ms = 10000;
    return c;
  }

 private:
  std::string job_id_, dir_, socket_, log_;
  Child child_;
};

}  // namespace ringsync::testing
