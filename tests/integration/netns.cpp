#include "netns.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <future>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "daemon_fixture.h"

namespace ringsync::test {

namespace {

constexpr const char* kPrefix = "rstest-";

// The `ip` program: on PATH, or where distributions put it (sbin is often not
// on a test runner's PATH).
std::string ip_program() {
  std::vector<std::string> dirs;
  if (const char* path = std::getenv("PATH")) {
    std::stringstream ss(path);
    std::string dir;
    while (std::getline(ss, dir, ':'))
      if (!dir.empty()) dirs.push_back(dir);
  }
  for (const char* dir : {"/usr/sbin", "/sbin", "/usr/bin", "/bin"}) dirs.push_back(dir);
  for (const auto& dir : dirs) {
    const std::string candidate = dir + "/ip";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// Runs `ip ARGS`; throws with the command and its output on failure.
void ip(const std::string& args) {
  const std::string command = ip_program() + " " + args;
  auto [code, output] = run_command(command);
  if (code != 0)
    throw std::runtime_error("'" + command + "' failed (" + std::to_string(code) + "): " + output);
}

std::vector<std::string> namespaces() {
  std::vector<std::string> names;
  auto [code, output] = run_command(ip_program() + " netns list");
  if (code != 0) return names;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    const std::string name = line.substr(0, line.find(' '));
    if (!name.empty()) names.push_back(name);
  }
  return names;
}

// Enters network namespace `name` on the calling thread only.
bool enter(const std::string& name, std::string& error) {
  const int fd = ::open(("/run/netns/" + name).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = "cannot open /run/netns/" + name + ": " + std::strerror(errno);
    return false;
  }
  const bool ok = ::setns(fd, CLONE_NEWNET) == 0;
  if (!ok) error = "setns(" + name + ") failed: " + std::strerror(errno);
  ::close(fd);
  return ok;
}

sockaddr_in ipv4(const std::string& host, std::uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  ::inet_pton(AF_INET, host.c_str(), &addr.sin_addr);
  return addr;
}

bool wait_fd(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  return ::poll(&p, 1, timeout_ms) == 1;
}

}  // namespace

void NetnsHosts::inside(int host, const std::function<void()>& fn) const {
  std::exception_ptr failed;
  std::string error;
  std::thread thread([&] {
    if (!enter(hosts_.at(host), error)) return;
    try {
      fn();
    } catch (...) {
      failed = std::current_exception();
    }
  });
  thread.join();
  if (!error.empty()) throw std::runtime_error(error);
  if (failed) std::rethrow_exception(failed);
}

std::string NetnsHosts::unavailable_reason() {
  if (::geteuid() != 0)
    return "multi-host tests build network namespaces and need root (CI runs them as root); "
           "run test_integration as root";
  if (ip_program().empty()) return "multi-host tests need the `ip` program (iproute2); none found";
  auto [code, output] = run_command(ip_program() + " netns list");
  if (code != 0) return "`ip netns list` failed, network namespaces are unavailable: " + output;
  return "";
}

NetnsHosts::NetnsHosts(int hosts) {
  static std::atomic<int> counter{0};
  if (hosts < 1 || hosts > 200) throw std::invalid_argument("between 1 and 200 netns hosts");
  const std::string why = unavailable_reason();
  if (!why.empty()) throw std::runtime_error(why);
  remove_stale();
  prefix_ = std::string(kPrefix) + std::to_string(::getpid()) + "-" +
            std::to_string(counter++) + "-";
  bridge_ = prefix_ + "br";
  try {
    ip("netns add " + bridge_);
    created_.push_back(bridge_);
    ip("-n " + bridge_ + " link add br0 type bridge");
    ip("-n " + bridge_ + " link set br0 up");
    ip("-n " + bridge_ + " link set lo up");
    for (int i = 0; i < hosts; ++i) {
      const std::string host = prefix_ + "h" + std::to_string(i);
      ip("netns add " + host);
      created_.push_back(host);
      hosts_.push_back(host);
      // The pair is made inside the bridge namespace and one end moved to the
      // host, so no interface name ever appears in the machine's namespace.
      const std::string port = std::string("h").append(std::to_string(i));
      ip("-n " + bridge_ + " link add " + port + " type veth peer name eth0 netns " + host);
      ip("-n " + bridge_ + " link set " + port + " master br0");
      ip("-n " + bridge_ + " link set " + port + " up");
      ip("-n " + host + " addr add " + address(i) + "/24 dev eth0");
      ip("-n " + host + " link set eth0 up");
      ip("-n " + host + " link set lo up");
    }
  } catch (...) {
    for (auto it = created_.rbegin(); it != created_.rend(); ++it)
      run_command(ip_program() + " netns del " + *it);
    throw;
  }
}

NetnsHosts::~NetnsHosts() {
  // Hosts first: deleting a namespace deletes its veth end, and with it the peer.
  for (auto it = created_.rbegin(); it != created_.rend(); ++it)
    run_command(ip_program() + " netns del " + *it);
}

std::string NetnsHosts::address(int host) const { return "198.18.0." + std::to_string(host + 1); }

std::vector<std::string> NetnsHosts::launcher(int host) const {
  return {ip_program(), "netns", "exec", name(host)};
}

std::vector<std::string> NetnsHosts::launcher(int host, const std::string& hostname) const {
  auto argv = launcher(host);
  for (std::string part : {"unshare", "--uts", "sh", "-c"}) argv.push_back(part);
  argv.push_back("hostname " + hostname + " && exec \"$@\"");
  argv.push_back("sh");
  return argv;
}

std::pair<int, std::string> NetnsHosts::run(int host, const std::string& command) const {
  return run_command(ip_program() + " netns exec " + name(host) + " sh -c '" + command + "'");
}

std::string NetnsHosts::tcp_check(int from, int to) const {
  constexpr int kTimeoutMs = 5000;
  std::promise<std::uint16_t> port_promise;
  auto port_future = port_promise.get_future();
  std::string server_error, client_error;

  // Each side is a thread that enters its host's namespace; setns() moves only
  // the calling thread, and the thread ends right after.
  std::thread server([&] {
    std::uint16_t port = 0;
    int listener = -1;
    if (enter(name(to), server_error)) {
      listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in addr = ipv4(address(to), 0);
      socklen_t len = sizeof(addr);
      if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
          ::listen(listener, 1) == 0 &&
          ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
        port = ntohs(addr.sin_port);
      else
        server_error = std::string("listen on ") + address(to) + ": " + std::strerror(errno);
    }
    port_promise.set_value(port);
    if (port == 0) {
      if (listener >= 0) ::close(listener);
      return;
    }
    if (!wait_fd(listener, POLLIN, kTimeoutMs)) {
      server_error = "no connection arrived within 5 s";
    } else {
      const int conn = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      char buf[5] = {};
      if (conn < 0 || !wait_fd(conn, POLLIN, kTimeoutMs) ||
          ::recv(conn, buf, 5, MSG_WAITALL) != 5 || std::string(buf, 5) != "hello" ||
          ::send(conn, "olleh", 5, MSG_NOSIGNAL) != 5)
        server_error = "the server side of the exchange failed";
      if (conn >= 0) ::close(conn);
    }
    ::close(listener);
  });
  const std::uint16_t port = port_future.get();
  std::thread client([&] {
    if (port == 0 || !enter(name(from), client_error)) return;
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_in addr = ipv4(address(to), port);
    int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      err = ETIMEDOUT;
      socklen_t len = sizeof(err);
      if (wait_fd(fd, POLLOUT, kTimeoutMs)) ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    }
    char buf[5] = {};
    if (err != 0) {
      client_error = "connect to " + address(to) + ":" + std::to_string(port) + ": " +
                     std::strerror(err);
    } else if (::send(fd, "hello", 5, MSG_NOSIGNAL) != 5 || !wait_fd(fd, POLLIN, kTimeoutMs) ||
               ::recv(fd, buf, 5, MSG_WAITALL) != 5 || std::string(buf, 5) != "olleh") {
      client_error = "the client side of the exchange failed";
    }
    ::close(fd);
  });
  client.join();
  server.join();
  if (server_error.empty() && client_error.empty()) return "";
  return "host " + std::to_string(from) + " -> host " + std::to_string(to) + ": " +
         (server_error.empty() ? "" : "server: " + server_error + "; ") +
         (client_error.empty() ? "" : "client: " + client_error);
}

bool NetnsHosts::exists(const std::string& name) {
  const auto all = namespaces();
  return std::find(all.begin(), all.end(), name) != all.end();
}

std::string NetnsHosts::ip_path() { return ip_program(); }

void NetnsHosts::remove_stale() {
  for (const auto& name : namespaces()) {
    if (name.rfind(kPrefix, 0) != 0) continue;
    const pid_t pid = static_cast<pid_t>(std::atoi(name.c_str() + std::strlen(kPrefix)));
    if (pid <= 0) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // its owner still runs
    run_command(ip_program() + " netns del " + name);
  }
}

}  // namespace ringsync::test
