// Hosts for multi-host tests on one machine: H network namespaces, each with
// one veth link into a bridge that lives in a namespace of its own, so nothing
// is added to the machine's own network. Host i has 198.18.0.(i+1)/24 on eth0
// and lo up. 198.18.0.0/15 is reserved for network benchmarks (RFC 2544), so
// it cannot clash with a real network.
//
// Needs root and `ip netns` (iproute2). Names carry the pid, so parallel test
// processes do not clash; everything created is removed by the destructor,
// also when a test fails (processes still inside keep their namespace alive
// until they exit, but its name and links are gone).
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace ringsync::test {

class NetnsHosts {
 public:
  // Why this machine cannot build hosts ("" when it can): not root, no `ip`,
  // or `ip netns` not working.
  static std::string unavailable_reason();

  // Builds `hosts` hosts (at most 200); throws std::runtime_error naming the
  // command that failed, after removing what it had created.
  explicit NetnsHosts(int hosts);
  ~NetnsHosts();
  NetnsHosts(const NetnsHosts&) = delete;
  NetnsHosts& operator=(const NetnsHosts&) = delete;

  int size() const { return static_cast<int>(hosts_.size()); }
  const std::string& name(int host) const { return hosts_.at(host); }
  std::string address(int host) const;  // "198.18.0.(host+1)"
  // argv prefix that runs a program inside the host: {ip, netns, exec, NAME}.
  // `ip netns exec` execs the program, so the child's pid is the program's.
  std::vector<std::string> launcher(int host) const;
  // The same, in a UTS namespace of its own named `hostname` (as containers
  // and pods are): the program still keeps the pid.
  std::vector<std::string> launcher(int host, const std::string& hostname) const;
  // Runs a shell command inside the host; its exit code and output.
  std::pair<int, std::string> run(int host, const std::string& command) const;
  // Runs `fn` on a thread of this process that entered the host's network
  // namespace: the sockets it opens are the host's (e.g. HTTP to a server that
  // listens inside). Rethrows what fn throws; throws when it cannot enter.
  void inside(int host, const std::function<void()>& fn) const;
  // One TCP connection from host `from` to a listener on host `to`, a few bytes
  // each way (5 s limit); "" when it worked, else what failed.
  std::string tcp_check(int from, int to) const;

  // Deletes namespaces left by earlier test processes of this kind whose pid is gone.
  static void remove_stale();
  // Whether a network namespace of this name exists.
  static bool exists(const std::string& name);
  // Path of the `ip` program ("" when there is none).
  static std::string ip_path();

 private:
  std::string prefix_;              // "rstest-<pid>-<n>-"
  std::vector<std::string> hosts_;  // namespace names by host
  std::string bridge_;              // the bridge's namespace
  std::vector<std::string> created_;
};

}  // namespace ringsync::test
