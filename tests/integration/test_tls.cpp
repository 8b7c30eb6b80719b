// Mutual TLS on the control plane (--tls-cert, --tls-key, --tls-ca) with real
// daemons on loopback: rings of TLS daemons form and their collectives are
// right; a plain-text daemon, a raw plain-text hello, and a daemon whose
// certificate another CA signed are refused at the handshake (logged with
// their address, counted as auth errors) while the ring of the right nodes
// forms; a connection silent at the handshake is closed at its timeout; bad
// TLS files stop ringsyncd at start-up with a message naming the flag. The certificates are made for each test with the openssl command in
// a folder the test removes.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <thread>

#include "cluster_fixture.h"
#include "common/peer_wire.h"
#include "tls_certificates.h"

namespace test_integration_tls {

using namespace ringsync;
using namespace ringsync::test;
using namespace std::chrono_literals;

namespace {

// The daemon flags of a node showing certificate `name` and trusting `ca`
// (every daemon of a test shows the same: nodes are not told apart by their
// certificates).
std::vector<std::string> tls_flags(const TlsCertificates& certs, const std::string& name = "node",
                                   const std::string& ca = "ca.pem") {
  return {"--tls-cert", certs.file(name + ".pem"), "--tls-key", certs.file(name + ".key"), "--tls-ca",
          certs.file(ca)};
}

ClusterOptions tls_cluster(const TlsCertificates& certs, int nodes) {
  ClusterOptions o;
  o.nodes = nodes;
  o.local_size = 2;
  o.extra_flags = tls_flags(certs);
  // The strangers below know the job's token: only TLS can keep them out.
  o.extra_flags.insert(o.extra_flags.end(), {"--job-token", "tls-test-token"});
  return o;
}


double auth_errors(ClusterFixture& cluster, int node) {
  return metric_value(cluster.metrics(node), "ringsync_errors_total{kind=\"auth\"}").value_or(0);
}

// Waits up to `timeout` for `text` in node's log after byte `from`.
bool wait_log(ClusterFixture& cluster, int node, std::size_t from, const std::string& text,
              std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string log = cluster.log(node);
    if (log.size() > from && log.find(text, from) != std::string::npos) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
}

// Another ringsyncd that claims node 1 of the cluster's job (same job id and
// token), with `tls_flags` (none: plain text).
struct Stranger {
  Stranger(const ClusterFixture& cluster, const std::vector<std::string>& tls_flags) {
    std::ofstream(dir.file("hosts")) << cluster.control_address(0) << " slots=2\n"
                                     << cluster.control_address(1) << " slots=2\n";
    std::vector<std::string> argv = {bin("ringsyncd"), "--socket", dir.file("s.sock"), "--metrics-address", "off",
                                     "--hostfile", dir.file("hosts"), "--node-rank", "1", "--job-id",
                                     cluster.job_id(), "--job-token", "tls-test-token", "--ucx-transports",
                                     "tcp,self", "--join-timeout", "5s"};
    argv.insert(argv.end(), tls_flags.begin(), tls_flags.end());
    process = spawn(argv, {}, dir.file("log"));
  }
  std::string log() const { return read_file(dir.file("log")); }
  bool log_has(const std::string& text, std::chrono::seconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (log().find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(50ms);
    }
    return false;
  }
  TempDir dir;
  Child process;
};

// A plain TCP connection that sends a ringsync hello; true when the daemon
// closes it without sending anything back (a TLS port answers a plain hello
// with at most a TLS alert, never a ringsync frame).
bool plain_hello_is_closed_unanswered(const std::string& host_port, const std::string& job_id) {
  const auto colon = host_port.rfind(':');
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(std::stoi(host_port.substr(colon + 1))));
  ::inet_pton(AF_INET, host_port.substr(0, colon).c_str(), &addr.sin_addr);
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval tv{15, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  bool closed = false;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    peer_wire::PeerHello hello{peer_wire::kProtocolVersion, job_id, 1, 2, 2, {}, {1, 2, 3}, 0, 0, 0, 0, 0};
    const auto frame = peer_wire::encode(hello);
    ::send(fd, frame.data(), frame.size(), MSG_NOSIGNAL);
    std::string got;
    char buf[512];
    for (;;) {
      const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) {
        closed = n == 0 || errno == ECONNRESET;
        break;
      }
      got.append(buf, static_cast<std::size_t>(n));
    }
    // A TLS alert record starts with content type 21; a ringsync frame never does here.
    closed = closed && (got.empty() || got[0] == 21);
  }
  ::close(fd);
  return closed;
}

// Seconds until the daemon closes a connection on which nothing is sent
// (nullopt: still open after 30 s).
std::optional<double> silent_connection_lifetime(const std::string& host_port) {
  const auto colon = host_port.rfind(':');
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(std::stoi(host_port.substr(colon + 1))));
  ::inet_pton(AF_INET, host_port.substr(0, colon).c_str(), &addr.sin_addr);
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval tv{30, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::optional<double> lifetime;
  const auto start = std::chrono::steady_clock::now();
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    char buf[64];
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n == 0 || (n < 0 && errno == ECONNRESET))
      lifetime = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  ::close(fd);
  return lifetime;
}

// ringsyncd with these flags (and a socket of its own) must exit 2 at once
// with `expected` in what it says.
void check_refused_at_start(const std::vector<std::string>& flags, const std::string& expected) {
  TempDir dir;
  std::vector<std::string> argv = {bin("ringsyncd"), "--socket", dir.file("s.sock"), "--metrics-address", "off"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  Child daemon = spawn(argv, {}, dir.file("log"));
  const auto status = daemon.wait(20s);
  const std::string said = read_file(dir.file("log"));
  REQUIRE_MESSAGE(status.has_value(), "ringsyncd did not exit:\n", said);
  CHECK_MESSAGE((WIFEXITED(*status) && WEXITSTATUS(*status) == 2), said);
  CHECK_MESSAGE(said.find(expected) != std::string::npos, "expected '", expected, "' in:\n", said);
}

}  // namespace

TEST_CASE("tls: two and three daemons with mutual TLS form a ring and every collective is right") {
  const TlsCertificates certs;
  for (int nodes : {2, 3}) {
    CAPTURE(nodes);
    ClusterFixture cluster(tls_cluster(certs, nodes));
    REQUIRE_MESSAGE(wait_for_ring(cluster, 30s), cluster.logs());
    CHECK_MESSAGE(cluster.log(0).find("(mutual TLS, certificate /CN=ringsync-node)") != std::string::npos,
                  cluster.log(0));
    CHECK(run_job(cluster, "tls-collectives", {"collectives", "1", "3", "1001", "300000"}));
    CHECK(auth_errors(cluster, 0) == 0);
    const std::string problems = cluster.stop_all();
    CHECK_MESSAGE(problems.empty(), problems, cluster.logs());
  }
}

TEST_CASE("tls: a plain-text peer against a TLS daemon is refused, and the ring of the right peers still forms") {
  const TlsCertificates certs;
  ClusterFixture cluster(tls_cluster(certs, 2));
  const std::size_t from = cluster.log(0).size();

  // A raw hello in plain text: closed at the handshake, no ringsync answer.
  CHECK(plain_hello_is_closed_unanswered(cluster.control_address(0), cluster.job_id()));
  CHECK_MESSAGE(wait_log(cluster, 0, from, "refused peer at 127.0.0.1 on the control port", 10s), cluster.log(0));
  CHECK_MESSAGE(wait_log(cluster, 0, from, "the TLS handshake failed", 1s), cluster.log(0));

  // A whole daemon without TLS (with the job's token) claims node 1: refused
  // the same way, and told what it lacks.
  Stranger plain(cluster, {});
  CHECK_MESSAGE(plain.log_has("if node 0 runs with TLS", 30s), plain.log());
  CHECK(auth_errors(cluster, 0) >= 2);

  REQUIRE_MESSAGE(wait_for_ring(cluster, 30s), cluster.logs());
  CHECK(run_job(cluster, "after-plain-stranger", {"collectives", "1", "1001"}));
  CHECK_MESSAGE(plain.log().find("' formed:") == std::string::npos, plain.log());
  plain.process.signal(SIGTERM);
  const std::string problems = cluster.stop_all();
  CHECK_MESSAGE(problems.empty(), problems, cluster.logs());
}

TEST_CASE("tls: a peer silent at the handshake is closed after --handshake-timeout; the ring forms all the same") {
  const TlsCertificates certs;
  ClusterOptions options = tls_cluster(certs, 2);
  options.extra_flags.insert(options.extra_flags.end(), {"--handshake-timeout", "2s"});
  ClusterFixture cluster(options);
  const std::size_t from = cluster.log(0).size();
  std::optional<double> lifetime;
  std::thread silent([&] { lifetime = silent_connection_lifetime(cluster.control_address(0)); });
  // The handshake waits beside the accept loop: the right nodes are not held up.
  CHECK_MESSAGE(wait_for_ring(cluster, 30s), cluster.logs());
  silent.join();
  REQUIRE_MESSAGE(lifetime.has_value(), "node 0 kept a silent connection open for 30 s:\n", cluster.log(0));
  CHECK(*lifetime >= 1.5);
  CHECK(*lifetime < 10);
  CHECK_MESSAGE(wait_log(cluster, 0, from, "did not finish the TLS handshake within 2", 5s), cluster.log(0));
  const std::string problems = cluster.stop_all();
  CHECK_MESSAGE(problems.empty(), problems, cluster.logs());
}

TEST_CASE("tls: a peer whose certificate the CA did not sign is refused, and the ring of the right peers still forms") {
  const TlsCertificates certs;
  ClusterFixture cluster(tls_cluster(certs, 2));
  const std::size_t from = cluster.log(0).size();
  const double auth_before = auth_errors(cluster, 0);

  // Its own CA signed its certificate; it trusts the job's CA as well.
  Stranger rogue(cluster, tls_flags(certs, "rogue", "both-cas.pem"));
  CHECK_MESSAGE(wait_log(cluster, 0, from, "the TLS handshake failed: certificate verify failed", 30s),
                cluster.log(0));
  // TLS 1.3: node 0 checks the client's certificate after the client's side
  // of the handshake ended, so the rogue learns it from the closed link.
  CHECK_MESSAGE(rogue.log_has("node 0 may have refused this node's certificate", 30s), rogue.log());
  CHECK(auth_errors(cluster, 0) > auth_before);

  REQUIRE_MESSAGE(wait_for_ring(cluster, 30s), cluster.logs());
  CHECK(run_job(cluster, "after-rogue", {"collectives", "1", "1001"}));
  rogue.process.signal(SIGTERM);
  const std::string problems = cluster.stop_all();
  CHECK_MESSAGE(problems.empty(), problems, cluster.logs());
}

TEST_CASE("tls: bad TLS files stop ringsyncd at start-up with a message naming the flag") {
  const TlsCertificates certs;
  const auto flags = [&](const std::string& cert, const std::string& key, const std::string& ca) {
    return std::vector<std::string>{"--tls-cert", certs.file(cert), "--tls-key", certs.file(key), "--tls-ca",
                                    certs.file(ca)};
  };
  SUBCASE("not all three") {
    check_refused_at_start({"--tls-cert", certs.file("node.pem")}, "--tls-key, --tls-ca missing");
  }
  SUBCASE("a missing file") {
    check_refused_at_start(flags("node.pem", "node.key", "nothing.pem"), "nothing.pem' (--tls-ca): No such file");
  }
  SUBCASE("a key others may read") {
    std::ofstream(certs.file("open.key")) << read_file(certs.file("node.key"));
    ::chmod(certs.file("open.key").c_str(), 0644);
    check_refused_at_start(flags("node.pem", "open.key", "ca.pem"), "has mode 0644");
  }
  SUBCASE("an encrypted key (no terminal prompt: refused at once)") {
    certs.openssl("ec -in node.key -aes256 -passout pass:secret -out encrypted.key");
    ::chmod(certs.file("encrypted.key").c_str(), 0600);
    check_refused_at_start(flags("node.pem", "encrypted.key", "ca.pem"), "(or is encrypted");
  }
  SUBCASE("a key that is not the certificate's") {
    check_refused_at_start(flags("node.pem", "rogue.key", "ca.pem"), "is not the key of the certificate");
  }
  SUBCASE("a certificate the CA did not sign") {
    check_refused_at_start(flags("rogue.pem", "rogue.key", "ca.pem"), "does not verify against");
  }
  SUBCASE("a file that is not PEM") {
    check_refused_at_start(flags("node.pem", "node.key", "node.ext"), "(--tls-ca) is not a PEM CA certificate");
  }
}

}  // namespace test_integration_tls
