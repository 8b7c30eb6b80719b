// KeptStates (service/local/kept_states.h): what a daemon keeps of its trainers'
// committed states, within its limit, until their job has been gone a while.
#include <doctest/doctest.h>

#include <cstring>
#include <memory>

#include "service/local/kept_states.h"

namespace test_service_local_kept_states {

using namespace ringsync;
using namespace ringsync::service;

namespace {

std::shared_ptr<shm::Region> region(std::size_t bytes, char fill) {
  auto r = shm::Region::create(bytes, "kept-state-test");
  REQUIRE(r.ok());
  std::memset(r->data(), fill, bytes);
  return std::make_shared<shm::Region>(std::move(r).value());
}

}  // namespace

TEST_CASE("kept states: the last one per job, local rank and name; fetched as kept") {
  local::KeptStates kept(1 << 20);
  const local::KeptStates::Key a{"job", 0, "model"}, b{"job", 1, "model"}, c{"other", 0, "model"};
  CHECK(!kept.fetch(a));
  REQUIRE(kept.keep(a, region(4096, 'a'), 100).ok());
  REQUIRE(kept.keep(b, region(4096, 'b'), 4096).ok());
  REQUIRE(kept.keep(c, region(4096, 'c'), 1).ok());
  CHECK(kept.size() == 3);
  CHECK(kept.bytes() == 3 * 4096);
  auto got = kept.fetch(a);
  REQUIRE(got);
  CHECK(got->bytes == 100);
  CHECK(static_cast<char>(got->region->data()[99]) == 'a');
  // A newer state replaces the old: its memory goes.
  REQUIRE(kept.keep(a, region(8192, 'n'), 8000).ok());
  CHECK(kept.bytes() == 4096 + 8192 + 4096);
  CHECK(static_cast<char>(kept.fetch(a)->region->data()[0]) == 'n');
  CHECK(kept.fetch(a)->bytes == 8000);
  // The same buffer kept again (a longer part of it) costs nothing more.
  auto same = kept.fetch(b)->region;
  REQUIRE(kept.keep(b, same, 10).ok());
  CHECK(kept.bytes() == 4096 + 8192 + 4096);
  CHECK(kept.fetch(b)->bytes == 10);
}

TEST_CASE("kept states: past the node's limit a state is refused, and what was kept stays") {
  local::KeptStates kept(3 * 4096);
  const local::KeptStates::Key a{"j", 0, "s"}, b{"j", 1, "s"};
  REQUIRE(kept.keep(a, region(4096, 'a'), 4096).ok());
  const Status refused = kept.keep(b, region(3 * 4096, 'b'), 10);
  CHECK(refused.code() == StatusCode::kOutOfMemory);
  CHECK(refused.message().find("--max-kept-state-bytes") != std::string::npos);
  CHECK(refused.message().find("local rank 1 of job 'j'") != std::string::npos);
  CHECK(kept.size() == 1);
  CHECK(kept.bytes() == 4096);
  // Replacing a state frees its old memory first: a bigger one fits where the two would not.
  REQUIRE(kept.keep(a, region(3 * 4096, 'A'), 10).ok());
  CHECK(kept.bytes() == 3 * 4096);
  CHECK(kept.keep(a, region(4096, 'x'), 4097).code() == StatusCode::kInvalidArgument);  // longer than its buffer
  local::KeptStates none(0);
  CHECK(none.keep(a, region(4096, 'a'), 1).code() == StatusCode::kOutOfMemory);
}

TEST_CASE("kept states: a job's states go after its linger, unless it comes back") {
  using namespace std::chrono_literals;
  local::KeptStates kept(1 << 20);
  REQUIRE(kept.keep({"gone", 0, "s"}, region(4096, 'g'), 1).ok());
  REQUIRE(kept.keep({"gone", 3, "t"}, region(4096, 'g'), 1).ok());
  REQUIRE(kept.keep({"back", 0, "s"}, region(4096, 'b'), 1).ok());
  REQUIRE(kept.keep({"running", 0, "s"}, region(4096, 'r'), 1).ok());
  const auto t0 = local::KeptStates::Clock::now();
  kept.job_gone("gone", t0 + 10s);
  kept.job_gone("back", t0 + 10s);
  CHECK(kept.forget_expired(t0 + 5s) == 0);
  kept.job_back("back");  // a rank of the job connected again
  CHECK(kept.forget_expired(t0 + 11s) == 2);
  CHECK(!kept.fetch({"gone", 0, "s"}));
  CHECK(!kept.fetch({"gone", 3, "t"}));
  CHECK(kept.fetch({"back", 0, "s"}));
  CHECK(kept.fetch({"running", 0, "s"}));
  CHECK(kept.bytes() == 2 * 4096);
}

TEST_CASE("auth: kept states remember the uid that kept them until they go") {
  local::KeptStates kept(1 << 20);
  CHECK_FALSE(kept.owner("job"));
  REQUIRE(kept.keep({"job", 0, "model"}, region(4096, 'a'), 10).ok());
  kept.set_owner("job", 1000);
  CHECK(kept.owner("job") == std::uint32_t{1000});
  const auto t0 = local::KeptStates::Clock::now();
  kept.job_gone("job", t0 + std::chrono::seconds(10));
  CHECK(kept.forget_expired(t0) == 0);
  CHECK(kept.owner("job") == std::uint32_t{1000});  // gone from the node, its states still its user's
  CHECK(kept.forget_expired(t0 + std::chrono::seconds(11)) == 1);
  CHECK_FALSE(kept.owner("job"));  // the states went: the id is free again
}

}  // namespace test_service_local_kept_states
