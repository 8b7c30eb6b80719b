// The rendezvous through a store (node ranks by compare-and-swap, leases,
// token proofs), with the nodes of a job in one process over a MemoryStore.
// The same logic against a real etcd: tests/integration/test_etcd.cpp.
#include <doctest/doctest.h>

#include <utility>  // Asio 1.18 needs std::exchange declared first

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <optional>

#include "service/rendezvous/memory_store.h"
#include "service/rendezvous/store_rendezvous.h"
#include "service/rendezvous/token_proof.h"

namespace test_service_rendezvous_store_rendezvous {

using namespace ringsync;
using namespace ringsync::service::rendezvous;
namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

struct Job {
  asio::io_context io;
  std::shared_ptr<MemoryStore::State> state = std::make_shared<MemoryStore::State>();

  std::shared_ptr<StoreRendezvous> node(const std::string& address, std::string token = "t0k3n",
                                        std::uint32_t nodes = 3, std::uint32_t slots = 2) {
    return std::make_shared<StoreRendezvous>(io, std::make_unique<MemoryStore>(state),
                                             RendezvousJob{"train", std::move(token), nodes, slots, address}, 10s);
  }

  // Runs an awaitable to its end on the loop (bounded: 20 s of loop time).
  template <typename T>
  T run(asio::awaitable<T> task) {
    std::optional<T> out;
    io.restart();  // a loop that ran out of work stays stopped until restarted
    asio::co_spawn(io, [&]() -> asio::awaitable<void> { out = co_await std::move(task); }, asio::detached);
    for (int i = 0; i < 2000 && !out; ++i) io.run_for(10ms);
    REQUIRE(out.has_value());
    return std::move(*out);
  }
};

}  // namespace

TEST_CASE("rendezvous: nodes take ranks in arrival order and find each other") {
  Job job;
  auto a = job.node("10.0.0.3:29517"), b = job.node("10.0.0.1:29517"), c = job.node("10.0.0.2:29517");
  CHECK(*job.run(a->join(std::nullopt)) == 0);
  CHECK(*job.run(b->join(std::nullopt)) == 1);
  CHECK(*job.run(c->join(std::nullopt)) == 2);
  auto members = job.run(b->members(std::chrono::steady_clock::now() + 2s));
  REQUIRE_MESSAGE(members.ok(), members.status().message());
  REQUIRE(members->nodes.size() == 3);
  CHECK(members->nodes[0].host == "10.0.0.3");
  CHECK(members->nodes[1].host == "10.0.0.1");
  CHECK(members->nodes[2].port == 29517);
  CHECK(members->nodes[2].slots == 2);
  // Node 0 numbers each membership; the counter only grows.
  CHECK(*job.run(a->next_epoch()) == 1);
  CHECK(*job.run(a->next_epoch()) == 2);
}

TEST_CASE("rendezvous: a node that comes back at its address keeps its rank; a stated rank must be free") {
  Job job;
  auto a = job.node("h0:1"), b = job.node("h1:1");
  CHECK(*job.run(a->join(std::nullopt)) == 0);
  CHECK(*job.run(b->join(std::nullopt)) == 1);
  // h1's daemon restarts before its old registration expired.
  auto b_again = job.node("h1:1");
  CHECK(*job.run(b_again->join(std::nullopt)) == 1);
  // Another host asking for rank 0 is told who holds it.
  auto intruder = job.node("h9:1");
  auto refused = job.run(intruder->join(0u));
  REQUIRE_FALSE(refused.ok());
  CHECK_MESSAGE(refused.status().message().find("node rank 0 of job 'train' is held by h0:1") != std::string::npos,
                refused.status().message());
  // A free stated rank is taken.
  CHECK(*job.run(intruder->join(2u)) == 2);
  // A fourth node is one too many.
  auto extra = job.node("h4:1");
  auto too_many = job.run(extra->join(std::nullopt));
  REQUIRE_FALSE(too_many.ok());
  CHECK_MESSAGE(too_many.status().message().find("already has all its 3 nodes registered") != std::string::npos,
                too_many.status().message());
}

TEST_CASE("rendezvous: another token or shape for the job is refused; the token itself is never stored") {
  Job job;
  auto a = job.node("h0:1", "right");
  CHECK(*job.run(a->join(std::nullopt)) == 0);
  auto wrong = job.node("h1:1", "wrong");
  auto refused = job.run(wrong->join(std::nullopt));
  REQUIRE_FALSE(refused.ok());
  CHECK_MESSAGE(refused.status().message().find("with another token") != std::string::npos, refused.status().message());
  auto shape = job.node("h1:1", "right", 4, 2);
  auto other_shape = job.run(shape->join(std::nullopt));
  REQUIRE_FALSE(other_shape.ok());
  CHECK_MESSAGE(other_shape.status().message().find("3 node(s) x 2 slot(s)") != std::string::npos,
                other_shape.status().message());
  for (const auto& [key, value] : job.state->entries) CHECK(value.value.find("right") == std::string::npos);
  // The proof depends on the token, the job and the salt.
  CHECK(token_proof("a", "j", "s") != token_proof("b", "j", "s"));
  CHECK(token_proof("a", "j", "s") != token_proof("a", "k", "s"));
  CHECK(same_proof(token_proof("a", "j", "s"), token_proof("a", "j", "s")));
}

TEST_CASE("rendezvous: a crashed node's registration expires and its rank goes to the next node") {
  Job job;
  auto a = job.node("h0:1", "t", 2), b = job.node("h1:1", "t", 2);
  CHECK(*job.run(a->join(std::nullopt)) == 0);
  CHECK(*job.run(b->join(std::nullopt)) == 1);
  // h1 crashes: its lease (the second granted) expires.
  job.state->expire(2);
  auto waiting = job.run(a->members(std::chrono::steady_clock::now() + 300ms));
  REQUIRE_FALSE(waiting.ok());
  CHECK_MESSAGE(waiting.status().message().find("node(s) 1 of job 'train' did not register") != std::string::npos,
                waiting.status().message());
  auto spare = job.node("h2:1", "t", 2);
  CHECK(*job.run(spare->join(std::nullopt)) == 1);
  auto members = job.run(a->members(std::chrono::steady_clock::now() + 1s));
  REQUIRE(members.ok());
  CHECK(members->nodes[1].host == "h2");
}

TEST_CASE("rendezvous: a store that is down is a clear error, bounded") {
  Job job;
  auto a = job.node("h0:1");
  job.state->down = true;
  auto joined = job.run(a->join(std::nullopt));
  REQUIRE_FALSE(joined.ok());
  CHECK(joined.status().message().find("memory://test is down") != std::string::npos);
  job.state->down = false;
  CHECK(job.run(a->join(std::nullopt)).ok());
  job.state->down = true;
  const auto begun = std::chrono::steady_clock::now();
  auto members = job.run(a->members(std::chrono::steady_clock::now() + 400ms));
  REQUIRE_FALSE(members.ok());
  CHECK(members.status().message().find("is down") != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - begun < 5s);
}

}  // namespace test_service_rendezvous_store_rendezvous
