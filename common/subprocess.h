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

class Child {
 public:
  // argv[0] is the program path. stdout/stderr go to `log_path` when given.
  static Result<Child> start(const std::vector<std::string>& argv,
                     const std::map<std::string, std::string>& extra_env = {},
                     const std::string& log_path = "");
  Child() = default;
  Child(Child&& other) noexcept;
  Child& operator=(Child&& other) noexcept;
  ~Child();  // kills and reaps a child still running

  pid_t pid() const { return pid_; }
  // The raw wait status once the child exited within `timeout`; nullopt otherwise.
  std::optional<int> wait(std::chrono::milliseconds timeout);
  // True if it exited normally with code 0 within `timeout`.
  bool succeeded(std::chrono::milliseconds timeout);
  void signal(int sig);
  bool running();

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
};

}  // namespace ringsync
