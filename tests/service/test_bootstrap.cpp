// Forming rings of daemons' control planes on loopback, and the ways it fails.
#include <doctest/doctest.h>

#include <utility>  // Asio 1.18 needs std::exchange declared first

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <optional>

#include "service/cluster/bootstrap.h"
#include "service/cluster/control_listener.h"

using namespace ringsync;
using namespace ringsync::service::cluster;
namespace asio = boost::asio;
using asio::ip::tcp;
using namespace std::chrono_literals;

namespace {

struct Cluster {
  asio::io_context io;
  std::unique_ptr<ControlListener> listener;
  std::vector<HostEntry> nodes;
  std::vector<std::optional<Result<Joined>>> results;
  std::vector<std::shared_ptr<StopSource>> stops;

  explicit Cluster(std::size_t n, ControlListener::Options options = {}) {
    auto opened = ControlListener::open(io, "127.0.0.1:0", options);
    REQUIRE(opened.ok());
    listener = std::move(opened).value();
    for (std::size_t i = 0; i < n; ++i) nodes.push_back({"127.0.0.1", 0, 2});
    nodes[0].port = listener->port();
    results.resize(n);
    for (std::size_t i = 0; i < n; ++i) stops.push_back(std::make_shared<StopSource>());
  }

  BootstrapConfig config(std::uint32_t rank, std::chrono::milliseconds timeout = 5000ms) const {
    BootstrapConfig c;
    c.job_id = "job";
    c.token = "s3cret";
    c.node_rank = rank;
    c.slots = 2;
    c.nodes = nodes;
    c.ucx_address = {static_cast<std::uint8_t>(rank), 0xAB};
    c.join_timeout = timeout;
    return c;
  }

  void start(BootstrapConfig c) {
    const auto rank = c.node_rank;
    if (rank == 0) {
      auto gathering = std::make_shared<Gathering>(io.get_executor(), c);
      listener->route(c.job_id, [gathering](const std::shared_ptr<PeerLink>& link, const peer_wire::PeerHello& h) {
        gathering->offer(link, h);
      });
      asio::co_spawn(
          io, [this, gathering]() -> asio::awaitable<void> { results[0] = co_await gathering->wait(stops[0]); },
          asio::detached);
      return;
    }
    asio::co_spawn(
        io, [this, c, rank]() -> asio::awaitable<void> { results[rank] = co_await join(c, stops[rank]); },
        asio::detached);
  }

  // Runs the loop until the given ranks have results (bounded: 20 s).
  bool wait(const std::vector<std::uint32_t>& ranks) {
    for (int i = 0; i < 2000; ++i) {
      bool all = true;
      for (auto r : ranks) all = all && results[r].has_value();
      if (all) return true;
      io.run_for(10ms);
    }
    return false;
  }
};

}  // namespace

TEST_CASE("rings of 1 to 5 nodes form, and everyone learns every UCX address") {
  for (std::size_t n : {1u, 2u, 3u, 5u}) {
    CAPTURE(n);
    Cluster cluster(n);
    // Workers first: they retry until the coordinator is there.
    for (std::uint32_t r = n; r-- > 0;) cluster.start(cluster.config(r));
    std::vector<std::uint32_t> all(n);
    for (std::uint32_t r = 0; r < n; ++r) all[r] = r;
    REQUIRE(cluster.wait(all));
    for (std::uint32_t r = 0; r < n; ++r) {
      const auto& result = *cluster.results[r];
      REQUIRE_MESSAGE(result.ok(), result.status().message());
      REQUIRE(result->ucx_addresses.size() == n);
      for (std::uint32_t k = 0; k < n; ++k)
        CHECK(result->ucx_addresses[k] == std::vector<std::uint8_t>{static_cast<std::uint8_t>(k), 0xAB});
      if (r == 0) {
        for (std::uint32_t k = 1; k < n; ++k) CHECK(result->workers[k] != nullptr);
      } else {
        CHECK(result->coordinator != nullptr);
      }
    }
  }
}

TEST_CASE("a node with the wrong token, job or shape is refused with the reason") {
  Cluster cluster(2);
  cluster.start(cluster.config(0, 1500ms));
  auto bad = cluster.config(1);
  bad.token = "guess";
  cluster.start(bad);
  REQUIRE(cluster.wait({0, 1}));
  CHECK(cluster.results[1]->status().code() == StatusCode::kInvalidArgument);
  CHECK(cluster.results[1]->status().message().find("did not present the job's token") != std::string::npos);
  // The coordinator, still missing node 1, gives up at its deadline naming it.
  CHECK(cluster.results[0]->status().code() == StatusCode::kTimeout);
  CHECK(cluster.results[0]->status().message().find("node(s) 1 of job 'job' did not join") != std::string::npos);

  // (A hello naming another job goes to that job's route: see the parking test.)
  Cluster shapes(2);
  shapes.start(shapes.config(0, 1500ms));
  auto other_slots = shapes.config(1);
  other_slots.slots = 4;
  shapes.start(other_slots);
  REQUIRE(shapes.wait({0, 1}));
  CHECK(shapes.results[1]->status().message().find("has 4 slots, this ring 2") != std::string::npos);
}

TEST_CASE("a node whose small allreduces would take another path than node 0's is refused") {
  // With different --inline-bytes one node would exchange a tensor directly
  // while another negotiated it: both would wait for ever.
  Cluster cluster(2);
  auto coordinator = cluster.config(0, 1500ms);
  coordinator.inline_bytes = 32 * 1024;
  cluster.start(coordinator);
  auto other = cluster.config(1);
  other.inline_bytes = 0;
  cluster.start(other);
  REQUIRE(cluster.wait({0, 1}));
  REQUIRE_FALSE(cluster.results[1]->ok());
  CHECK_MESSAGE(cluster.results[1]->status().message().find(
                    "node 1 runs --inline-bytes 0, node 0 32768; every node must use the same") != std::string::npos,
                cluster.results[1]->status().message());
}

TEST_CASE("a node that would move allreduces by another algorithm than node 0's is refused") {
  // One node running halving-doubling and its peer the ring would wait for
  // messages the other never sends.
  Cluster cluster(2);
  auto coordinator = cluster.config(0, 1500ms);
  coordinator.halving_doubling_bytes = 256 * 1024;
  cluster.start(coordinator);
  auto other = cluster.config(1);
  other.halving_doubling_bytes = 0;
  cluster.start(other);
  REQUIRE(cluster.wait({0, 1}));
  REQUIRE_FALSE(cluster.results[1]->ok());
  CHECK_MESSAGE(cluster.results[1]->status().message().find(
                    "node 1 runs --algorithm ring, node 0 auto (halving-doubling allreduces up to 256KiB, ring "
                    "above); every node must use the same (--algorithm, --rhd-max-bytes)") != std::string::npos,
                cluster.results[1]->status().message());
}

TEST_CASE("no coordinator: a worker gives up at its deadline naming the address") {
  Cluster cluster(2);
  cluster.listener.reset();  // nobody listens on node 0's port now
  cluster.start(cluster.config(1, 700ms));
  REQUIRE(cluster.wait({1}));
  CHECK(cluster.results[1]->status().code() == StatusCode::kTimeout);
  CHECK(cluster.results[1]->status().message().find("node 0 at 127.0.0.1:" + std::to_string(cluster.nodes[0].port) +
                                                    " did not accept") != std::string::npos);
}

TEST_CASE("a silent peer is declared lost by the heartbeat watchdog") {
  Cluster cluster(2);
  cluster.start(cluster.config(0));
  cluster.start(cluster.config(1));
  REQUIRE(cluster.wait({0, 1}));
  REQUIRE(cluster.results[0]->ok());
  REQUIRE(cluster.results[1]->ok());
  auto coordinator_side = (*cluster.results[0])->workers[1];
  auto worker_side = (*cluster.results[1])->coordinator;
  std::optional<Status> lost;
  coordinator_side->set_handlers([](peer_wire::Message) {}, [&](const Status& s) { lost = s; });
  // Only the coordinator sends heartbeats: the worker looks stopped (SIGSTOP-like).
  coordinator_side->start_heartbeats(50ms, 300ms);
  for (int i = 0; i < 300 && !lost; ++i) cluster.io.run_for(10ms);
  REQUIRE(lost.has_value());
  CHECK(lost->code() == StatusCode::kPeerLost);
  CHECK(lost->message().find("heartbeat timeout") != std::string::npos);
  worker_side->close(Status::Closed("test over"));
}

TEST_CASE("heartbeats keep a healthy link alive; closing one end tells the other") {
  Cluster cluster(2);
  cluster.start(cluster.config(0));
  cluster.start(cluster.config(1));
  REQUIRE(cluster.wait({0, 1}));
  auto a = (*cluster.results[0])->workers[1];
  auto b = (*cluster.results[1])->coordinator;
  std::optional<Status> a_closed, b_closed;
  a->set_handlers([](peer_wire::Message) {}, [&](const Status& s) { a_closed = s; });
  b->set_handlers([](peer_wire::Message) {}, [&](const Status& s) { b_closed = s; });
  a->start_heartbeats(20ms, 200ms);
  b->start_heartbeats(20ms, 200ms);
  cluster.io.run_for(600ms);  // three timeouts' worth: the watchdogs must stay quiet
  CHECK_FALSE(a_closed.has_value());
  CHECK_FALSE(b_closed.has_value());
  b->close(Status::Closed("leaving"));
  for (int i = 0; i < 200 && !a_closed; ++i) cluster.io.run_for(10ms);
  REQUIRE(a_closed.has_value());
  CHECK(a_closed->code() == StatusCode::kPeerLost);
}

TEST_CASE("a hello for a job not served here waits for it, then is refused naming the job") {
  ControlListener::Options quick;
  quick.park_timeout = 600ms;
  Cluster cluster(2, quick);
  // Node 1 says hello before node 0 has the job: it waits, then hears why.
  cluster.start(cluster.config(1, 3000ms));
  REQUIRE(cluster.wait({1}));
  REQUIRE_FALSE(cluster.results[1]->ok());
  const std::string why = cluster.results[1]->status().message();
  CHECK_MESSAGE(why.find("job 'job' has no trainer connected to the ringsyncd at 127.0.0.1:") != std::string::npos,
                why);

  // Routed in time, the waiting hello goes to the job.
  Cluster late(2);
  late.start(late.config(1));
  late.io.run_for(300ms);
  late.start(late.config(0));
  REQUIRE(late.wait({0, 1}));
  CHECK_MESSAGE(late.results[0]->ok(), late.results[0]->status().message());
  CHECK_MESSAGE(late.results[1]->ok(), late.results[1]->status().message());
}

TEST_CASE("stopping ends a join and a gathering at once") {
  Cluster cluster(3);
  cluster.start(cluster.config(0, 60000ms));
  cluster.start(cluster.config(1, 60000ms));
  cluster.io.run_for(200ms);  // node 1 joined, node 2 never comes
  const auto begun = std::chrono::steady_clock::now();
  cluster.stops[0]->request();
  cluster.stops[1]->request();
  REQUIRE(cluster.wait({0, 1}));
  CHECK(std::chrono::steady_clock::now() - begun < 10s);  // not the 60 s join timeout
  CHECK(cluster.results[0]->status().code() == StatusCode::kClosed);
  CHECK(cluster.results[1]->status().code() == StatusCode::kClosed);
}
