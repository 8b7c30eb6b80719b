// Helpers for integration tests: child processes, temporary folders, files.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/subprocess.h"

namespace ringsync::test {

using ringsync::Child;

// Starts a child or throws (tests want a loud failure).
Child spawn(const std::vector<std::string>& argv,
            const std::map<std::string, std::string>& extra_env = {},
            const std::string& log_path = "");

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
