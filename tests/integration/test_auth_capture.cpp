// What someone on the path between two real daemons sees of a keyed job's
// control plane: node 1 reaches node 0 through a relay that keeps a copy of
// every byte, the ring forms and runs through it, and the key is nowhere in
// the copy (the handshake is challenge-response: formation/peer_auth.h).
#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <vector>

#include "cluster_fixture.h"
#include "tcp_relay.h"

namespace test_integration_auth_capture {

using namespace ringsync::test;
using namespace std::chrono_literals;

TEST_CASE("auth: a capture of two real daemons' bootstrap and job holds no byte run of the key") {
  const std::uint16_t port0 = free_loopback_port();
  std::uint16_t port1 = free_loopback_port();
  while (port1 == port0) port1 = free_loopback_port();
  TcpRelay relay(port0);

  // Node 1's host list sends it to node 0 through the relay; node 0 listens
  // where its own list says.
  TempDir dir;
  const std::string through_relay = dir.file("hostfile-node1");
  std::ofstream(through_relay) << "127.0.0.1:" << relay.port() << " slots=2\n"
                               << "127.0.0.1:" << port1 << " slots=2\n";
  ClusterOptions options;
  options.nodes = 2;
  options.local_size = 2;
  options.places = {NodePlace{"127.0.0.1", port0, {}, {}},
                    NodePlace{"127.0.0.1", port1, {}, {"--hostfile", through_relay}}};
  ClusterFixture cluster(options);

  // Small allreduces go in control frames (exchanged directly), large ones
  // over the ring: both kinds of traffic pass the relay or the data plane.
  RankGroup ranks(cluster, "through-relay");
  ranks.start_all({"collectives", "1", "1001", "786433"});
  const auto codes = ranks.wait(120s);
  REQUIRE_MESSAGE(codes == std::vector<int>(codes.size(), 0), ranks.report(), cluster.logs());

  const std::string captured = relay.captured();
  CHECK(relay.connections() >= 1);
  // The copy is of the job's frames: the job id travels in clear.
  REQUIRE_MESSAGE(captured.find(cluster.job_id()) != std::string::npos, "the relay saw ", captured.size(),
                  " bytes without the job id: did node 1 bypass it?");
  const std::string& key = cluster.token();
  REQUIRE(key.size() >= 8);
  CHECK(captured.find(key) == std::string::npos);
  for (std::size_t i = 0; i + 8 <= key.size(); ++i) {
    CAPTURE(i);
    CHECK(captured.find(key.substr(i, 8)) == std::string::npos);
  }
  const std::string problems = cluster.stop_all();
  CHECK_MESSAGE(problems.empty(), problems, cluster.logs());
}

}  // namespace test_integration_auth_capture
