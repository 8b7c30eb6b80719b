#include "cli/find_program.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string_view>

namespace ringsync::cli {
namespace {

bool is_executable_file(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

Result<std::string> find_program(const std::string& name) {
  if (name.empty()) return Status::InvalidArgument("the command is an empty string");
  if (name.find('/') != std::string::npos) {
    if (is_executable_file(name)) return name;
    if (::access(name.c_str(), F_OK) != 0) return Status::InvalidArgument(name + ": no such file");
    return Status::InvalidArgument(name + ": not an executable file");
  }
  const char* path_env = ::getenv("PATH");
  // POSIX: an empty PATH entry means the current directory.
  const std::string_view path = path_env ? path_env : "/usr/local/bin:/usr/bin:/bin";
  for (std::size_t begin = 0;;) {
    const std::size_t end = std::min(path.find(':', begin), path.size());
    const std::string dir(path.substr(begin, end - begin));
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (is_executable_file(candidate)) return candidate;
    if (end == path.size()) break;
    begin = end + 1;
  }
  return Status::InvalidArgument(name + ": command not found in PATH");
}

}  // namespace ringsync::cli
