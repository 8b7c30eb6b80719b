// ringsync wait: blocks until a ringsyncd accepts connections on the socket the
// trainers here would use, so a batch script can start the daemons in the
// background and the trainers only once they serve (see kWaitHelp).
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "common/socket_path.h"
#include "common/units.h"

namespace ringsync::cli {

namespace {

constexpr const char* kWaitHelp =
    "usage: ringsync wait [--socket PATH] [--timeout DURATION]\n\n"
    "Waits until a ringsyncd accepts connections on PATH, prints 'ringsyncd serves PATH' and\n"
    "exits 0; exits 1 after --timeout (default 60s) with what it tried. PATH defaults to the\n"
    "socket trainers here would use: RINGSYNC_SOCKET, else under Slurm (SLURM_JOB_ID) the\n"
    "job's own daemon's (ringsyncd-slurm-<job>.sock), else the default. In a batch script:\n"
    "  srun --ntasks-per-node=1 --overlap ringsyncd &\n"
    "  srun --ntasks-per-node=1 --overlap ringsync wait\n";

std::map<std::string, std::string> environment() {
  std::map<std::string, std::string> env;
  for (const char* name : {"RINGSYNC_SOCKET", "SLURM_JOB_ID", "XDG_RUNTIME_DIR"})
    if (const char* value = std::getenv(name)) env[name] = value;
  return env;
}

// 0 when something accepted a connection at `path`, else the errno of the try.
int try_connect(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  const int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  const int err = rc == 0 ? 0 : errno;
  ::close(fd);  // before any hello: the daemon drops it without a word
  return err;
}

}  // namespace

int wait_daemon(const std::vector<std::string>& args) {
  const auto env = environment();
  std::string path;
  std::chrono::nanoseconds timeout = std::chrono::seconds(60);
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      std::cout << kWaitHelp;
      return 0;
    }
    if ((a == "--socket" || a == "--timeout") && i + 1 < args.size()) {
      const std::string& value = args[++i];
      if (a == "--socket") {
        path = value;
      } else if (auto d = units::parse_duration(value); d.ok() && d->count() > 0) {
        timeout = *d;
      } else {
        std::cerr << "ringsync wait: --timeout '" << value << "' is not a duration such as 30s or 2m\n";
        return 2;
      }
      continue;
    }
    std::cerr << "ringsync wait: unknown argument '" << a << "'\n\n" << kWaitHelp;
    return 2;
  }
  if (path.empty()) {
    if (auto it = env.find("RINGSYNC_SOCKET"); it != env.end() && !it->second.empty()) path = it->second;
  }
  if (path.empty()) path = slurm_socket_path(env, ::getuid());
  if (path.empty()) path = default_socket_path(env, ::getuid());
  if (path.size() >= sizeof(sockaddr_un{}.sun_path)) {
    std::cerr << "ringsync wait: socket path '" << path << "' is too long for a Unix socket\n";
    return 2;
  }

  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int err = 0;
  for (;;) {
    err = try_connect(path);
    if (err == 0) {
      std::cout << "ringsyncd serves " << path << std::endl;
      return 0;
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  char host[256] = "this host";
  ::gethostname(host, sizeof(host) - 1);
  std::cerr << "ringsync wait: no ringsyncd on " << host << " accepted a connection at " << path << " within "
            << units::format_seconds(timeout) << " (last try: " << std::strerror(err)
            << "); start it there, or pass its --socket\n";
  return 1;
}

}  // namespace ringsync::cli
