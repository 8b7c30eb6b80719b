// Elastic jobs: how each run's roster follows from the last and from who is
// registered (service/rendezvous/roster.h), and the rendezvous that writes
// them (elastic_rendezvous.h) with a job's nodes in one process over a
// MemoryStore. Against a real etcd with real daemons: tests/integration/test_elastic.cpp.
#include <doctest/doctest.h>

#include <utility>  // Asio 1.18 needs std::exchange declared first

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <map>
#include <optional>
#include <set>

#include "service/rendezvous/elastic_rendezvous.h"
#include "service/rendezvous/memory_store.h"
#include "service/rendezvous/roster.h"

namespace test_service_rendezvous_roster {

using namespace ringsync;
using namespace ringsync::service::rendezvous;
namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

std::vector<std::string> addresses(const Roster& r) {
  std::vector<std::string> out;
  for (const auto& n : r.nodes) out.push_back(n.address);
  return out;
}

Roster run(std::uint64_t epoch, std::vector<RosterNode> nodes) {
  Roster r;
  r.epoch = epoch;
  r.nodes = std::move(nodes);
  r.store_revision = 42;
  return r;
}

}  // namespace

TEST_CASE("roster: the first run takes the first registrations in the order they came") {
  const RosterShape shape{2, 4, 3};
  auto waiting = next_roster({}, {{"b:1", 5}, {"a:1", 9}}, shape);
  CHECK(waiting.kind == NextRoster::Kind::kWait);
  CHECK(waiting.why.find("2 of the first 3") != std::string::npos);
  auto first = next_roster({}, {{"d:1", 12}, {"b:1", 5}, {"a:1", 9}, {"c:1", 10}}, shape);
  REQUIRE(first.kind == NextRoster::Kind::kReady);
  CHECK(first.roster.epoch == 1);
  CHECK(addresses(first.roster) == std::vector<std::string>{"b:1", "a:1", "c:1"});  // d:1 is a spare
  CHECK(first.roster.nodes[1].revision == 9);
  auto parsed = parse_roster(roster_json(first.roster));
  REQUIRE(parsed.ok());
  CHECK(addresses(*parsed) == addresses(first.roster));
  CHECK(parsed->epoch == 1);
  CHECK(!parse_roster("{\"nodes\":3}").ok());
}

TEST_CASE("roster: survivors keep their places, a spare takes the lost node's, holes close up, the roster grows") {
  const RosterShape shape{2, 4, 3};
  const Roster last = run(5, {{"a:1", 10}, {"b:1", 11}, {"c:1", 12}});
  // b is gone; a and c registered again (new revisions); s waited as a spare.
  auto spare = next_roster(last, {{"a:1", 20}, {"c:1", 21}, {"s:1", 7}}, shape);
  REQUIRE(spare.kind == NextRoster::Kind::kReady);
  CHECK(spare.roster.epoch == 6);
  CHECK(addresses(spare.roster) == std::vector<std::string>{"a:1", "s:1", "c:1"});
  CHECK(spare.roster.nodes[0].revision == 20);
  CHECK(spare.roster.store_revision == 42);  // what the roster key is swapped from
  // The roster says what changed, so a node that first reads it after it was written logs the same.
  CHECK(spare.roster.left == std::vector<std::string>{"b:1"});
  CHECK(spare.roster.joined == std::vector<std::string>{"s:1"});
  auto read_back = parse_roster(roster_json(spare.roster));
  REQUIRE(read_back.ok());
  CHECK(read_back->left == spare.roster.left);
  CHECK(read_back->joined == spare.roster.joined);
  CHECK(!parse_roster(R"({"epoch":2,"nodes":[],"left":[3]})").ok());
  // No spare: c moves up.
  auto fewer = next_roster(last, {{"a:1", 20}, {"c:1", 21}}, shape);
  REQUIRE(fewer.kind == NextRoster::Kind::kReady);
  CHECK(addresses(fewer.roster) == std::vector<std::string>{"a:1", "c:1"});
  // Everyone back, plus two new nodes: the roster grows to max_nodes (4), the last waits.
  auto grown = next_roster(last, {{"a:1", 20}, {"b:1", 22}, {"c:1", 21}, {"n:1", 23}, {"m:1", 24}}, shape);
  REQUIRE(grown.kind == NextRoster::Kind::kReady);
  CHECK(addresses(grown.roster) == std::vector<std::string>{"a:1", "b:1", "c:1", "n:1"});
  CHECK(grown.roster.left.empty());
  CHECK(grown.roster.joined == std::vector<std::string>{"n:1"});
}

TEST_CASE("roster: below min_nodes it says so; a node still registered from the last run is waited for") {
  const RosterShape shape{2, 3, 3};
  const Roster last = run(2, {{"a:1", 10}, {"b:1", 11}, {"c:1", 12}});
  auto below = next_roster(last, {{"a:1", 20}}, shape);
  CHECK(below.kind == NextRoster::Kind::kBelowMin);
  CHECK(below.why.find("1 node(s) are there, fewer than the job's minimum of 2") != std::string::npos);
  // b still holds the registration it ran with: its run may go on, or its lease has yet to expire.
  auto stale = next_roster(last, {{"a:1", 20}, {"b:1", 11}, {"c:1", 21}}, shape);
  CHECK(stale.kind == NextRoster::Kind::kWait);
  CHECK(stale.why.find("b:1") != std::string::npos);
  // ... unless a node of its run saw that registration lost: then it is gone at once.
  auto gone = next_roster(last, {{"a:1", 20}, {"b:1", 11}, {"c:1", 21}}, shape, {{"b:1", 11}});
  REQUIRE(gone.kind == NextRoster::Kind::kReady);
  CHECK(addresses(gone.roster) == std::vector<std::string>{"a:1", "c:1"});
  // A mark for an older registration of the address does not count against a newer one.
  auto older = next_roster(last, {{"a:1", 20}, {"b:1", 11}, {"c:1", 21}}, shape, {{"b:1", 3}});
  CHECK(older.kind == NextRoster::Kind::kWait);
}

namespace {

struct ElasticJobInStore {
  asio::io_context io;
  std::shared_ptr<MemoryStore::State> state = std::make_shared<MemoryStore::State>();
  std::chrono::milliseconds below_min_wait{500};

  std::shared_ptr<ElasticRendezvous> node(const std::string& address, std::uint32_t min = 2, std::uint32_t max = 3,
                                          std::uint32_t first = 3) {
    return std::make_shared<ElasticRendezvous>(
        io, std::make_unique<MemoryStore>(state),
        ElasticJob{"elastic", "t0k3n", min, max, first, 1, address, below_min_wait}, 10s);
  }

  // Starts join() on each node; runs the loop until every one has its answer or `limit` passed.
  std::map<std::string, Result<std::uint32_t>> join(const std::map<std::string, std::shared_ptr<ElasticRendezvous>>& nodes,
                                                     std::chrono::milliseconds limit = 5s) {
    auto out = std::make_shared<std::map<std::string, Result<std::uint32_t>>>();
    for (const auto& [name, r] : nodes)
      asio::co_spawn(io, [out, name, r]() -> asio::awaitable<void> { out->emplace(name, co_await r->join(std::nullopt)); },
                     asio::detached);
    io.restart();
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (out->size() < nodes.size() && std::chrono::steady_clock::now() < deadline) io.run_for(10ms);
    return *out;
  }
};

}  // namespace

TEST_CASE("elastic rendezvous: the first run places three nodes; after one is lost, the spare takes its place") {
  ElasticJobInStore job;
  std::map<std::string, std::shared_ptr<ElasticRendezvous>> nodes{
      {"h0:1", job.node("h0:1")}, {"h1:1", job.node("h1:1")}, {"h2:1", job.node("h2:1")}};
  auto first = job.join(nodes);
  REQUIRE(first.size() == 3);
  std::set<std::uint32_t> ranks;
  std::string lost;  // the node at rank 1
  for (auto& [name, rank] : first) {
    REQUIRE_MESSAGE(rank.ok(), rank.status().message());
    ranks.insert(*rank);
    if (*rank == 1) lost = name;
  }
  CHECK(ranks == std::set<std::uint32_t>{0, 1, 2});
  CHECK(nodes["h0:1"]->num_nodes() == 3u);
  // A spare registers while the run goes on: it waits.
  auto spare = job.node("spare:1");
  std::optional<Result<std::uint32_t>> spare_place;
  asio::co_spawn(job.io, [&]() -> asio::awaitable<void> { spare_place = co_await spare->join(std::nullopt); },
                 asio::detached);
  job.io.restart();
  job.io.run_for(300ms);
  CHECK(!spare_place.has_value());
  // The run breaks: every node leaves it; rank 1's node is gone for good (its
  // lease runs out), the others come back.
  std::map<std::string, std::shared_ptr<ElasticRendezvous>> again;
  for (auto& [name, r] : nodes) {
    r->leave();
    if (name != lost) again[name] = job.node(name);
  }
  job.state->expire(job.state->entries.at("/ringsync/jobs/elastic/members/" + lost).lease);
  auto second = job.join(again);
  REQUIRE(second.size() == 2);
  for (auto& [name, rank] : second) {
    REQUIRE_MESSAGE(rank.ok(), rank.status().message());
    CHECK(*rank == *first.at(name));  // survivors keep their places
  }
  for (int i = 0; i < 100 && !spare_place; ++i) job.io.run_for(10ms);
  REQUIRE(spare_place.has_value());
  REQUIRE_MESSAGE(spare_place->ok(), spare_place->status().message());
  CHECK(**spare_place == 1);
  CHECK(spare->num_nodes() == 3u);
  for (auto& [name, r] : again) r->leave();
  spare->leave();
}

TEST_CASE("elastic rendezvous: below the minimum a node waits --elastic-timeout, then fails saying why") {
  ElasticJobInStore job;
  std::map<std::string, std::shared_ptr<ElasticRendezvous>> nodes{{"h0:1", job.node("h0:1", 2, 2, 2)},
                                                                   {"h1:1", job.node("h1:1", 2, 2, 2)}};
  auto first = job.join(nodes);
  for (auto& [name, rank] : first) REQUIRE_MESSAGE(rank.ok(), rank.status().message());
  for (auto& [name, r] : nodes) r->leave();
  job.state->expire(job.state->entries.at("/ringsync/jobs/elastic/members/h1:1").lease);
  auto alone = job.join({{"h0:1", job.node("h0:1", 2, 2, 2)}}, 5s);
  REQUIRE(alone.size() == 1);
  const auto& outcome = alone.begin()->second;
  REQUIRE_FALSE(outcome.ok());
  CHECK(outcome.status().code() == StatusCode::kTimeout);
  CHECK_MESSAGE(outcome.status().message().find("1 node(s) are there, fewer than the job's minimum of 2") !=
                    std::string::npos,
                outcome.status().message());
  CHECK(outcome.status().message().find("--elastic-timeout") != std::string::npos);
}

TEST_CASE("elastic rendezvous: a job described elastic on one node and fixed on another is refused") {
  ElasticJobInStore job;
  auto elastic = job.node("h0:1");
  std::optional<Result<std::uint32_t>> first;
  asio::co_spawn(job.io, [&]() -> asio::awaitable<void> { first = co_await elastic->join(std::nullopt); },
                 asio::detached);
  job.io.restart();
  job.io.run_for(100ms);
  auto other = std::make_shared<ElasticRendezvous>(job.io, std::make_unique<MemoryStore>(job.state),
                                                   ElasticJob{"elastic", "t0k3n", 1, 5, 3, 1, "h1:1", 1s}, 10s);
  auto refused = job.join({{"other", other}});
  REQUIRE_FALSE(refused.at("other").ok());
  CHECK_MESSAGE(refused.at("other").status().message().find("with 2 to 3 node(s)") != std::string::npos,
                refused.at("other").status().message());
  elastic->leave();
}

TEST_CASE("elastic rendezvous: a spare waits through a healthy run, past --elastic-timeout, and changes nothing") {
  ElasticJobInStore job;  // --elastic-timeout 0.5 s
  std::map<std::string, std::shared_ptr<ElasticRendezvous>> nodes{{"h0:1", job.node("h0:1", 2, 2, 2)},
                                                                   {"h1:1", job.node("h1:1", 2, 2, 2)}};
  for (auto& [name, rank] : job.join(nodes)) REQUIRE_MESSAGE(rank.ok(), rank.status().message());
  const std::string roster = job.state->entries.at("/ringsync/jobs/elastic/roster").value;
  auto spare = job.node("spare:1", 2, 2, 2);
  auto waited = job.join({{"spare", spare}}, 1500ms);
  CHECK(waited.empty());  // still waiting: the run goes on, its nodes keep their leases alive
  CHECK(job.state->entries.at("/ringsync/jobs/elastic/roster").value == roster);
  for (auto& [name, r] : nodes) r->leave();
  spare->leave();
}

TEST_CASE("elastic rendezvous: a node its run saw lost is replaced at once, before its lease runs out") {
  ElasticJobInStore job;
  std::map<std::string, std::shared_ptr<ElasticRendezvous>> nodes{
      {"h0:1", job.node("h0:1")}, {"h1:1", job.node("h1:1")}, {"h2:1", job.node("h2:1")}};
  auto first = job.join(nodes);
  std::string lost;
  for (auto& [name, rank] : first) {
    REQUIRE_MESSAGE(rank.ok(), rank.status().message());
    if (*rank == 2) lost = name;
  }
  auto spare = job.node("spare:1");
  std::optional<Result<std::uint32_t>> spare_place;
  asio::co_spawn(job.io, [&]() -> asio::awaitable<void> { spare_place = co_await spare->join(std::nullopt); },
                 asio::detached);
  // The survivors' ring lost node 2: they say so; its registration (lease) stays.
  std::map<std::string, std::shared_ptr<ElasticRendezvous>> again;
  for (auto& [name, r] : nodes) {
    if (name == lost) continue;
    r->report_lost(2);
    r->leave();
    again[name] = job.node(name);
  }
  auto second = job.join(again);
  for (auto& [name, rank] : second) REQUIRE_MESSAGE(rank.ok(), rank.status().message());
  for (int i = 0; i < 100 && !spare_place; ++i) job.io.run_for(10ms);
  REQUIRE(spare_place.has_value());
  REQUIRE_MESSAGE(spare_place->ok(), spare_place->status().message());
  CHECK(**spare_place == 2);
  CHECK(job.state->entries.count("/ringsync/jobs/elastic/members/" + lost) == 1);  // never expired
  for (auto& [name, r] : again) r->leave();
  spare->leave();
  nodes.at(lost)->leave();
}

TEST_CASE("roster: a registration seen lost is no newcomer, though it is still there") {
  const RosterShape shape{2, 3, 3};
  const Roster after_loss = run(4, {{"a:1", 20}, {"c:1", 21}});  // b was lost in run 3
  // b's registration of run 3 is still there (its lease has yet to run out), marked lost.
  const std::vector<RosterNode> lost{{"b:1", 11}};
  CHECK_FALSE(is_newcomer(after_loss, {"b:1", 11}, lost));
  CHECK(is_newcomer(after_loss, {"b:1", 30}, lost));  // b registered again: it may join
  CHECK(is_newcomer(after_loss, {"s:1", 7}, lost));
  auto next = next_roster(after_loss, {{"a:1", 40}, {"c:1", 41}, {"b:1", 11}}, shape, lost);
  REQUIRE(next.kind == NextRoster::Kind::kReady);
  CHECK(addresses(next.roster) == std::vector<std::string>{"a:1", "c:1"});
}

}  // namespace test_service_rendezvous_roster
