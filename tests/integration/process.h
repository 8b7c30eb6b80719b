// Child processes for integration tests: spawn with extra environment, wait
// with a deadline (never hang a test), kill.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ringsync::test {

class Child {
 public:
  // argv[0] is the program path. stdout/stderr go to `log_path` when given.
  static Child spawn(const std::vector<std::string>& argv,
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

// A fresh private directory removed on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::string read_file(const std::string& path);
// Path of a program built next to the tests.
std::string bin(const std::string& name);

}  // namespace ringsync::test
