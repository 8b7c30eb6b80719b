// Forming rings of daemons' control planes on loopback, and the ways it fails.
#include <doctest/doctest.h>

#include <utility>  // Asio 1.18 needs std::exchange declared first

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <optional>

#include "service/cluster/bootstrap.h"

using namespace ringsync;
using namespace ringsync::service::cluster;
namespace asio = boost::asio;
using asio::ip::tcp;
using namespace std::chrono_literals;

namespace {

struct Cluster {
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::vector<HostEntry> nodes;
  std::vector<std::optional<Result<Membership>>> results;

  explicit Cluster(std::size_t n) {
    acceptor.open(tcp::v4());
    acceptor.set_option(tcp::acceptor::reuse_address(true));
    acceptor.bind(tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    acceptor.listen();
    for (std::size_t i = 0; i < n; ++i) nodes.push_back({"127.0.0.1", 0, 2});
    nodes[0].port = acceptor.local_endpoint().port();
    results.resize(n);
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
    asio::co_spawn(
        io,
        [this, c, rank]() -> asio::awaitable<void> {
          results[rank] = co_await bootstrap(c, rank == 0 ? &acceptor : nullptr);
        },
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

  Cluster shapes(3);
  shapes.start(shapes.config(0, 1500ms));
  auto other_job = shapes.config(1);
  other_job.job_id = "other";
  shapes.start(other_job);
  auto other_slots = shapes.config(2);
  other_slots.slots = 4;
  shapes.start(other_slots);
  REQUIRE(shapes.wait({0, 1, 2}));
  CHECK(shapes.results[1]->status().message().find("is in job 'other', this ring is job 'job'") != std::string::npos);
  CHECK(shapes.results[2]->status().message().find("has 4 slots, this ring 2") != std::string::npos);
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

TEST_CASE("no coordinator: a worker gives up at its deadline naming the address") {
  Cluster cluster(2);
  cluster.acceptor.close();  // nobody listens on node 0's port now
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
