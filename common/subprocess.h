// Child processes: spawn with extra environment and optional log file, wait
// with a deadline (never hang the caller), signal. Used by the CLI launcher
// and by the integration tests.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace ringsync {

// How Child::start_with starts a child. The defaults match Child::start.
struct SpawnOptions {
  // Added to (or replacing values in) this process's environment.
  std::map<std::string, std::string> extra_env;
  // Variables dropped from the inherited environment (before extra_env is applied).
  std::vector<std::string> remove_env;
  // stdout and stderr appended to this file; "" keeps this process's.
  std::string log_path;
  // stdout and stderr into two pipes whose non-blocking read ends the Child owns
  // (stdout_fd(), stderr_fd()). Overrides log_path.
  bool capture_output = false;
  // stdin from /dev/null: a child in its own process group that read the terminal
  // would be stopped (SIGTTIN), and many children sharing one stdin is chaos.
  bool null_stdin = false;
  // The child leads a new process group: signal_group() then reaches the processes it
  // started too, and a terminal's Ctrl-C reaches only us, so we decide the order of
  // shutdown.
  bool own_process_group = false;
  // Linux: the child gets this signal when this process dies (0: none), so a killed
  // launcher leaves no orphans behind. Strictly, when the thread that started it
  // exits: start such children from a thread that lives as long as they should.
  int parent_death_signal = 0;
};

class Child {
 public:
  // argv[0] is the program path. stdout/stderr go to `log_path` when given.
  static Result<Child> start(const std::vector<std::string>& argv,
                     const std::map<std::string, std::string>& extra_env = {},
                     const std::string& log_path = "");
  // argv[0] is the program path (not searched in PATH). Fails, with nothing left
  // running, when the program cannot be executed.
  static Result<Child> start_with(const std::vector<std::string>& argv, const SpawnOptions& options);
  Child() = default;
  Child(Child&& other) noexcept;
  Child& operator=(Child&& other) noexcept;
  ~Child();  // kills and reaps a child still running; closes the output pipes

  pid_t pid() const { return pid_; }
  // The raw wait status once the child exited within `timeout`; nullopt otherwise.
  std::optional<int> wait(std::chrono::milliseconds timeout);
  // True if it exited normally with code 0 within `timeout`.
  bool succeeded(std::chrono::milliseconds timeout);
  void signal(int sig);
  // To the child's whole process group when it leads one (own_process_group), else
  // to the child alone; nothing once it has been reaped.
  void signal_group(int sig);
  bool running();

  // Read ends of the captured stdout and stderr (capture_output), -1 otherwise.
  int stdout_fd() const { return out_fd_; }
  int stderr_fd() const { return err_fd_; }

 private:
  void release();

  pid_t pid_ = -1;
  std::optional<int> status_;
  bool group_leader_ = false;
  int out_fd_ = -1;
  int err_fd_ = -1;
};

}  // namespace ringsync
