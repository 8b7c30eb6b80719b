// A real etcd (Debian's etcd-server) for one test: its own data directory,
// listening for clients on HOST:PORT (inside a network-namespace host when a
// launcher is given), started in bounded time and stopped by the destructor.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "process.h"

namespace ringsync::test {

class EtcdServer {
 public:
  // Why etcd cannot run here ("" when it can): the program is missing.
  static std::string unavailable_reason();

  // Starts etcd and waits (30 s at most) until it answers; throws with its
  // log when it does not.
  EtcdServer(const std::string& host, int client_port, int peer_port,
             const std::vector<std::string>& launcher = {});
  ~EtcdServer();
  EtcdServer(const EtcdServer&) = delete;
  EtcdServer& operator=(const EtcdServer&) = delete;

  std::string url() const;  // "etcd://HOST:PORT", for --rendezvous
  std::string log() const { return read_file(log_); }
  // SIGKILL: etcd is gone at once, as a crashed store would be.
  void kill();
  // SIGSTOP / SIGCONT: a store that takes connections but does not answer.
  void pause();
  void resume();
  // The value stored at `key` ("" when none), read with etcd's own client.
  std::string get(const std::string& key) const;
  // Writes key = value with etcd's own client; true when it worked.
  bool put(const std::string& key, const std::string& value) const;

 private:
  // Runs etcdctl against this server, where it runs; exit code and output.
  std::pair<int, std::string> ctl(const std::string& arguments) const;
  std::string host_;
  int port_;
  std::vector<std::string> launcher_;
  TempDir dir_;
  std::string log_;
  Child process_;
};

}  // namespace ringsync::test
