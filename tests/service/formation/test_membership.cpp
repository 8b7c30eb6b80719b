// formation::Membership alone (no JobRing, no negotiation): three nodes'
// memberships over loopback control links and the in-process data plane form
// one ring with one epoch; a loss on one node tears the ring down on every
// node with its verdict, and node 0's finish() ends it quietly everywhere.
#include <doctest/doctest.h>

#include <memory>
#include <optional>
#include <vector>

#include "service/cluster/job_ring_harness.h"
#include "service/formation/membership.h"
#include "service/rendezvous/rendezvous.h"

namespace test_service_formation_membership {

using namespace ringsync;
using namespace ringsync::service;
using ringsync::test::job_ring::FabricPlane;
namespace asio = boost::asio;

namespace {

struct Loss {
  Status why;
  bool quiet = false;
  std::int32_t lost_node = -1;
};

struct Member {
  std::unique_ptr<formation::ControlListener> listener;
  cluster::JobSpec spec;
  std::shared_ptr<formation::Membership> membership;
  std::optional<std::uint64_t> formed;  // the epoch
  std::vector<Loss> losses;
};

struct Ring {
  asio::io_context io;
  cluster::ClusterConfig config = ringsync::test::job_ring::settings();
  metrics::Registry registry;
  observe::DaemonMetrics metrics{registry};
  transport::InProcessFabric fabric;
  std::vector<Member> members;

  explicit Ring(int n) : fabric(n), members(n) {
    std::vector<HostEntry> list;
    for (auto& m : members) {
      auto listener = formation::ControlListener::open(io, "127.0.0.1:0", {});
      REQUIRE(listener.ok());
      m.listener = std::move(listener).value();
      list.push_back({"127.0.0.1", m.listener->port(), 1});
    }
    for (int i = 0; i < n; ++i) {
      Member& m = members[i];
      m.spec.id = "j";
      m.spec.token = "t";
      m.spec.num_nodes = static_cast<std::uint32_t>(n);
      m.spec.node_rank = static_cast<std::uint32_t>(i);
      m.spec.nodes = list;
      formation::Membership::Hooks hooks;
      hooks.formed = [&m](std::uint64_t epoch) { m.formed = epoch; };
      hooks.lost = [&m](const Status& why, bool quiet, std::int32_t node) { m.losses.push_back({why, quiet, node}); };
      hooks.attempt_failed = [](const Status&) {};
      hooks.message = [](std::uint32_t, peer_wire::Message) {};
      m.membership = std::make_shared<formation::Membership>(
          io, m.spec, config, i == 0 ? m.listener.get() : nullptr, std::make_unique<FabricPlane>(fabric, i), metrics,
          std::move(hooks), std::make_shared<rendezvous::StaticRendezvous>(list, static_cast<std::uint32_t>(i)));
      m.membership->set_reform(false);
    }
    for (auto& m : members) REQUIRE(m.membership->start().ok());
  }
  ~Ring() {
    for (auto& m : members) m.membership->stop(Status::Closed("test over"));
    // Until every formation coroutine has ended (bounded: a hang fails below).
    CHECK(run_until([&] { return all([](const Member& m) { return m.membership->ended(); }); }));
  }

  bool run_until(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      io.run_for(std::chrono::milliseconds(5));
    }
    return true;
  }
  bool all(const std::function<bool(const Member&)>& p) const {
    for (const auto& m : members)
      if (!p(m)) return false;
    return true;
  }
};

}  // namespace

TEST_CASE("membership: three nodes form one ring with one epoch") {
  Ring ring(3);
  REQUIRE(ring.run_until([&] { return ring.all([](const Member& m) { return m.formed.has_value(); }); }));
  for (const auto& m : ring.members) {
    CHECK(m.membership->formed());
    CHECK(*m.formed == *ring.members[0].formed);
    CHECK(m.membership->epoch() == *m.formed);
    CHECK(m.losses.empty());
  }
}

TEST_CASE("membership: a loss on one node ends the ring on every node with its verdict") {
  Ring ring(3);
  REQUIRE(ring.run_until([&] { return ring.all([](const Member& m) { return m.formed.has_value(); }); }));
  ring.members[1].membership->lose(Status::PeerLost("node 2 went silent"), 2);
  REQUIRE(ring.run_until([&] { return ring.all([](const Member& m) { return !m.losses.empty(); }); }));
  for (const auto& m : ring.members) {
    CAPTURE(m.spec.node_rank);
    CHECK_FALSE(m.membership->formed());
    CHECK(m.losses.size() == 1);
    CHECK_FALSE(m.losses[0].quiet);
    CHECK(m.losses[0].why.code() == StatusCode::kPeerLost);
    CHECK_MESSAGE(m.losses[0].why.message().find("node 2 went silent") != std::string::npos,
                  m.losses[0].why.message());
  }
}

TEST_CASE("membership: node 0's finish ends the ring quietly on every node") {
  Ring ring(3);
  REQUIRE(ring.run_until([&] { return ring.all([](const Member& m) { return m.formed.has_value(); }); }));
  ring.members[0].membership->finish(Status::Closed("the job's run ended"));
  REQUIRE(ring.run_until([&] { return ring.all([](const Member& m) { return !m.losses.empty(); }); }));
  for (const auto& m : ring.members) {
    CAPTURE(m.spec.node_rank);
    CHECK(m.losses[0].quiet);
    CHECK_FALSE(m.membership->formed());
  }
}

}  // namespace test_service_formation_membership
