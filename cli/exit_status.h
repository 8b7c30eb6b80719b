// What a child's wait status means, for messages and for the launcher's own exit
// code (a shell's convention: 128 + the signal for a child killed by one).
#pragma once

#include <string.h>
#include <sys/wait.h>

#include <string>

namespace ringsync::cli {

inline int exit_code(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

// "exited with status 3", "was killed by signal 9 (Killed)".
inline std::string describe_exit(int wait_status) {
  if (WIFEXITED(wait_status)) return "exited with status " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    const int sig = WTERMSIG(wait_status);
    const char* name = ::strsignal(sig);
    return "was killed by signal " + std::to_string(sig) + (name ? std::string(" (") + name + ")" : "");
  }
  return "stopped with wait status " + std::to_string(wait_status);
}

}  // namespace ringsync::cli
