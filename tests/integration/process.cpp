#include "process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>


namespace ringsync::test {

Child spawn(const std::vector<std::string>& argv,
            const std::map<std::string, std::string>& extra_env, const std::string& log_path) {
  auto child = Child::start(argv, extra_env, log_path);
  if (!child.ok()) throw std::runtime_error(child.status().message());
  return std::move(child).value();
}

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "ringsync-test-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string bin(const std::string& name) { return std::string(RINGSYNC_BIN_DIR) + "/" + name; }

}  // namespace ringsync::test
