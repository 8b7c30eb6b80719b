// Forming rings of daemons' control planes on loopback, and the ways it fails.
#include <doctest/doctest.h>

#include <utility>  // Asio 1.18 needs std::exchange declared first

#include <algorithm>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <functional>
#include <optional>

#include "service/formation/bootstrap.h"
#include "service/formation/control_listener.h"
#include "service/formation/peer_auth.h"

namespace test_service_formation_bootstrap {

using namespace ringsync;
using namespace ringsync::service::cluster;
using namespace ringsync::service::formation;
namespace asio = boost::asio;
using asio::ip::tcp;
using namespace std::chrono_literals;

namespace {

struct Cluster {
  asio::io_context io;
  mutable int auth_failures = 0;  // on_auth_failure of every node (config() hands it out)
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
    c.on_auth_failure = [this] { ++auth_failures; };
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

TEST_CASE("auth: a node with another key refuses node 0's proof, and node 0 logs and counts it") {
  Cluster cluster(2);
  cluster.start(cluster.config(0, 1500ms));
  auto bad = cluster.config(1);
  bad.token = "guess";
  cluster.start(bad);
  REQUIRE(cluster.wait({0, 1}));
  CHECK(cluster.results[1]->status().code() == StatusCode::kInvalidArgument);
  CHECK_MESSAGE(cluster.results[1]->status().message().find("could not prove it holds the job's key") !=
                    std::string::npos,
                cluster.results[1]->status().message());
  CHECK(cluster.auth_failures == 2);  // the worker refused node 0; node 0 saw it hang up
  // The coordinator, still missing node 1, gives up at its deadline naming it.
  CHECK(cluster.results[0]->status().code() == StatusCode::kTimeout);
  CHECK(cluster.results[0]->status().message().find("node(s) 1 of job 'job' did not join") != std::string::npos);
}

TEST_CASE("auth: a keyless node is refused by a keyed node 0, and a keyed node by a keyless node 0") {
  Cluster keyed(2);
  keyed.start(keyed.config(0, 1500ms));
  auto keyless = keyed.config(1);
  keyless.token = "";
  keyed.start(keyless);
  REQUIRE(keyed.wait({0, 1}));
  CHECK_MESSAGE(keyed.results[1]->status().message().find("has no job key, but this job needs one") !=
                    std::string::npos,
                keyed.results[1]->status().message());
  CHECK(keyed.auth_failures == 1);

  // Node 0 without a key cannot pass for one with it: the worker refuses the roster.
  Cluster open(2);
  auto coordinator = open.config(0, 1500ms);
  coordinator.token = "";
  open.start(coordinator);
  open.start(open.config(1));
  REQUIRE(open.wait({0, 1}));
  REQUIRE_FALSE(open.results[1]->ok());
  CHECK_MESSAGE(open.results[1]->status().message().find("without proving it holds the job's key") !=
                    std::string::npos,
                open.results[1]->status().message());
}

TEST_CASE("a node with another job shape is refused with the reason") {
  Cluster cluster(2);
  // (A hello naming another job goes to that job's route: see the parking test.)
  Cluster& shapes = cluster;
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
  coordinator.ring.inline_bytes = 32 * 1024;
  cluster.start(coordinator);
  auto other = cluster.config(1);
  other.ring.inline_bytes = 0;
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
  coordinator.ring.routes = {64 * 1024, 256 * 1024, /*fold=*/false};
  cluster.start(coordinator);
  auto other = cluster.config(1);
  other.ring.routes = {};
  cluster.start(other);
  REQUIRE(cluster.wait({0, 1}));
  REQUIRE_FALSE(cluster.results[1]->ok());
  CHECK_MESSAGE(cluster.results[1]->status().message().find(
                    "node 1 runs --algorithm ring, node 0 auto (allreduces by direct up to 64KiB, halving-doubling "
                    "up to 256KiB (direct where the node count is not a power of two), ring above); every node must "
                    "use the same (--algorithm, --direct-max-bytes, --rhd-max-bytes)") != std::string::npos,
                cluster.results[1]->status().message());
}

TEST_CASE("integrity: a node that checks results differently from node 0 is refused") {
  // A node that checks would wait for check words a node that does not never sends.
  Cluster cluster(2);
  auto coordinator = cluster.config(0, 1500ms);
  coordinator.ring.verify_results = ringsync::service::integrity::VerifyResults::kSample;
  cluster.start(coordinator);
  cluster.start(cluster.config(1));
  REQUIRE(cluster.wait({0, 1}));
  REQUIRE_FALSE(cluster.results[1]->ok());
  CHECK_MESSAGE(cluster.results[1]->status().message().find(
                    "node 1 runs --verify-results off, node 0 sample; every node must use the same") !=
                    std::string::npos,
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

namespace {

// A man in the middle: relays one worker's connection to node 0 and records
// the bytes each way, as a capture on the network would see them.
struct Relay {
  tcp::acceptor acceptor;
  std::vector<std::uint8_t> to_coordinator, to_worker;

  Relay(asio::io_context& io, std::uint16_t target)
      : acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
    asio::co_spawn(io, run(target), asio::detached);
  }
  std::uint16_t port() const { return acceptor.local_endpoint().port(); }

  asio::awaitable<void> run(std::uint16_t target) {
    auto ex = co_await asio::this_coro::executor;
    boost::system::error_code ec;
    auto worker = std::make_shared<tcp::socket>(ex);
    co_await acceptor.async_accept(*worker, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
    auto coordinator = std::make_shared<tcp::socket>(ex);
    co_await coordinator->async_connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), target),
                                        asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
    asio::co_spawn(ex, pipe(worker, coordinator, to_coordinator), asio::detached);
    asio::co_spawn(ex, pipe(coordinator, worker, to_worker), asio::detached);
  }

  static asio::awaitable<void> pipe(std::shared_ptr<tcp::socket> from, std::shared_ptr<tcp::socket> to,
                                    std::vector<std::uint8_t>& record) {
    std::uint8_t buffer[4096];
    boost::system::error_code ec;
    for (;;) {
      const std::size_t n =
          co_await from->async_read_some(asio::buffer(buffer), asio::redirect_error(asio::use_awaitable, ec));
      if (!ec) {
        record.insert(record.end(), buffer, buffer + n);
        co_await asio::async_write(*to, asio::buffer(buffer, n), asio::redirect_error(asio::use_awaitable, ec));
      }
      if (ec) {
        from->close(ec);
        to->close(ec);
        co_return;
      }
    }
  }
};

bool contains(const std::vector<std::uint8_t>& bytes, const std::string& text) {
  return std::search(bytes.begin(), bytes.end(), text.begin(), text.end()) != bytes.end();
}

// A peer the test drives by hand, connected to node 0's control port.
std::shared_ptr<PeerLink> stranger(Cluster& cluster, std::vector<peer_wire::Message>& heard,
                                   std::function<void(PeerLink&, const peer_wire::Message&)> answer = {},
                                   const std::vector<std::uint8_t>& first_bytes = {}) {
  tcp::socket socket(cluster.io);
  socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), cluster.listener->port()));
  if (!first_bytes.empty()) asio::write(socket, asio::buffer(first_bytes));
  auto link = std::make_shared<PeerLink>(ControlStream(std::move(socket)), "stranger");
  std::weak_ptr<PeerLink> weak = link;
  link->start(
      [&heard, weak, answer](peer_wire::Message m) {
        if (auto self = weak.lock(); self && answer) answer(*self, m);
        heard.push_back(std::move(m));
      },
      [](const Status&) {});
  return link;
}

bool refused_with(const std::vector<peer_wire::Message>& heard, const std::string& why) {
  for (const auto& m : heard)
    if (const auto* reply = std::get_if<peer_wire::PeerHelloReply>(&m))
      return !reply->accepted && reply->message.find(why) != std::string::npos;
  return false;
}

}  // namespace

TEST_CASE("auth: a capture of a real bootstrap holds no key bytes, and replaying it is refused") {
  const std::string key = "k3y-that-must-never-travel-0123456789";
  Cluster cluster(2);
  auto coordinator = cluster.config(0);
  coordinator.token = key;
  cluster.start(coordinator);
  Relay relay(cluster.io, cluster.listener->port());
  auto worker = cluster.config(1);
  worker.token = key;
  worker.nodes[0].port = relay.port();
  cluster.start(worker);
  REQUIRE(cluster.wait({0, 1}));
  REQUIRE_MESSAGE(cluster.results[0]->ok(), cluster.results[0]->status().message());
  REQUIRE_MESSAGE(cluster.results[1]->ok(), cluster.results[1]->status().message());
  CHECK(contains(relay.to_coordinator, "job"));  // the capture saw the hello
  CHECK(!relay.to_worker.empty());
  CHECK_FALSE(contains(relay.to_coordinator, key));
  CHECK_FALSE(contains(relay.to_worker, key));
  CHECK(cluster.auth_failures == 0);

  // Someone who captured that worker's bytes sends them to the next ring of
  // the same job and key: the challenge is new, so the old proof is wrong.
  Cluster next(2);
  auto next_coordinator = next.config(0);
  next_coordinator.token = key;
  next.start(next_coordinator);
  std::vector<peer_wire::Message> heard;
  auto replayer = stranger(next, heard, {}, relay.to_coordinator);
  for (int i = 0; i < 300 && !refused_with(heard, "wrong proof"); ++i) next.io.run_for(10ms);
  CHECK(refused_with(heard, "wrong proof of the job's key"));
  CHECK(next.auth_failures == 1);
  // The real node still joins.
  auto real = next.config(1);
  real.token = key;
  next.start(real);
  REQUIRE(next.wait({0, 1}));
  CHECK_MESSAGE(next.results[0]->ok(), next.results[0]->status().message());
  CHECK_MESSAGE(next.results[1]->ok(), next.results[1]->status().message());
  replayer->close(Status::Closed("test over"));
}

TEST_CASE("auth: a stranger with a wrong key is refused, and the ring of the right nodes still forms") {
  Cluster cluster(3);
  cluster.start(cluster.config(0));
  std::vector<peer_wire::Message> heard;
  peer_wire::PeerHello hello{peer_wire::kProtocolVersion, "job", 1, 3, 2, auth_nonce(), {9}, 0};
  auto intruder = stranger(cluster, heard, [hello](PeerLink& link, const peer_wire::Message& m) {
    if (const auto* challenge = std::get_if<peer_wire::AuthChallenge>(&m)) {
      const AuthTranscript t{"job", 3, 1, hello.ucx_address, hello.nonce, challenge->nonce};
      link.send(peer_wire::AuthProof{auth_proof("not-the-key", AuthRole::kWorker, t)});
    }
  });
  intruder->send(hello);
  cluster.start(cluster.config(1));
  cluster.start(cluster.config(2));
  REQUIRE(cluster.wait({0, 1, 2}));
  for (std::uint32_t r = 0; r < 3; ++r) CHECK_MESSAGE(cluster.results[r]->ok(), cluster.results[r]->status().message());
  for (int i = 0; i < 100 && heard.size() < 2; ++i) cluster.io.run_for(10ms);
  CHECK(std::holds_alternative<peer_wire::AuthChallenge>(heard.at(0)));
  CHECK(refused_with(heard, "node 1 sent a wrong proof of the job's key"));
  CHECK(cluster.auth_failures == 1);
  intruder->close(Status::Closed("test over"));
}

}  // namespace test_service_formation_bootstrap
