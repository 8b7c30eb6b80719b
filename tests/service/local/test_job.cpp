#include <doctest/doctest.h>

#include "service/local/job.h"

namespace test_service_local_job {

using namespace ringsync;
using namespace ringsync::service;

namespace {

local::Submission submission(std::uint32_t rank, std::string name, DType dtype = DType::kF32,
                      std::uint64_t count = 8, ReduceOp op = ReduceOp::kSum,
                      wire::CollectiveKind kind = wire::CollectiveKind::kAllreduce) {
  local::Submission s;
  s.local_rank = rank;
  s.request.name = std::move(name);
  s.request.kind = kind;
  s.request.dtype = dtype;
  s.request.count = count;
  s.request.op = op;
  s.submitted = Clock::now();
  return s;
}

}  // namespace

TEST_CASE("join checks size, range and taken slots") {
  local::Job job("j", 3);
  CHECK(job.join(0, 3, 100).ok());
  Status taken = job.join(0, 3, 101);
  CHECK(taken.code() == StatusCode::kInvalidArgument);
  CHECK(taken.message().find("already connected (pid 100)") != std::string::npos);
  Status size = job.join(1, 4, 102);
  CHECK(size.message().find("local size 3 but this client says 4") != std::string::npos);
  CHECK(job.join(3, 3, 103).message().find("out of range") != std::string::npos);
  CHECK(job.join(2, 3, 104).ok());
  CHECK(job.connected() == 2);
}

TEST_CASE("collectives match by name in any order and are ready when all ranks submitted") {
  local::Job job("j", 3);
  for (std::uint32_t r = 0; r < 3; ++r) REQUIRE(job.join(r, 3, 10 + r).ok());
  CHECK_FALSE(job.submit(submission(2, "b"))->has_value());
  CHECK_FALSE(job.submit(submission(0, "a"))->has_value());
  CHECK_FALSE(job.submit(submission(1, "a"))->has_value());
  CHECK_FALSE(job.submit(submission(0, "b"))->has_value());
  auto a = job.submit(submission(2, "a"));
  REQUIRE(a->has_value());
  CHECK((*a)->name == "a");
  CHECK((*a)->missing_ranks().empty());
  CHECK(local::check_agreement(**a).ok());
  CHECK(job.pending().size() == 1);
  CHECK(job.pending().at("b").missing_ranks() == std::vector<std::uint32_t>{1});
}

TEST_CASE("a rank submitting the same name twice before completion is refused") {
  local::Job job("j", 2);
  REQUIRE(job.join(0, 2, 1).ok());
  REQUIRE(job.join(1, 2, 2).ok());
  REQUIRE(job.submit(submission(0, "x")).ok());
  auto again = job.submit(submission(0, "x"));
  CHECK(again.status().code() == StatusCode::kInvalidArgument);
  CHECK(again.status().message().find("already submitted by local rank 0") != std::string::npos);
}

TEST_CASE("disagreement names the tensor, the fields and the ranks") {
  local::Job job("j", 3);
  for (std::uint32_t r = 0; r < 3; ++r) REQUIRE(job.join(r, 3, r).ok());
  REQUIRE(job.submit(submission(0, "w", DType::kF32, 8)).ok());
  REQUIRE(job.submit(submission(1, "w", DType::kF64, 8)).ok());
  auto ready = job.submit(submission(2, "w", DType::kF64, 9));
  REQUIRE(ready->has_value());
  Status s = local::check_agreement(**ready);
  CHECK(s.code() == StatusCode::kMismatch);
  CHECK(s.message() ==
        "local ranks disagree on tensor 'w': dtype: local rank 0 says f32, local ranks 1,2 say "
        "f64; count: local ranks 0,1 say 8, local rank 2 says 9");
}

TEST_CASE("different collectives under one name, and op and root disagreements") {
  local::Job job("j", 2);
  REQUIRE(job.join(0, 2, 1).ok());
  REQUIRE(job.join(1, 2, 2).ok());
  REQUIRE(job.submit(submission(0, "k")).ok());
  auto kinds = job.submit(submission(1, "k", DType::kF32, 8, ReduceOp::kSum,
                                     wire::CollectiveKind::kBroadcast));
  CHECK(local::check_agreement(**kinds).message().find("collective: local rank 0 says allreduce, local "
                                                "rank 1 says broadcast") != std::string::npos);
  REQUIRE(job.submit(submission(0, "o", DType::kF32, 8, ReduceOp::kMax)).ok());
  auto ops = job.submit(submission(1, "o", DType::kF32, 8, ReduceOp::kMin));
  CHECK(local::check_agreement(**ops).message().find("op: local rank 0 says max, local rank 1 says min") !=
        std::string::npos);
  auto b0 = submission(0, "r", DType::kF32, 8, ReduceOp::kSum, wire::CollectiveKind::kBroadcast);
  auto b1 = b0;
  b1.local_rank = 1;
  b1.request.root = 1;
  REQUIRE(job.submit(std::move(b0)).ok());
  auto roots = job.submit(std::move(b1));
  CHECK(local::check_agreement(**roots).message().find("root: local rank 0 says 0, local rank 1 says 1") !=
        std::string::npos);
}

TEST_CASE("a leaving rank breaks the job: pending work is returned, new work refused") {
  local::Job job("j", 2);
  REQUIRE(job.join(0, 2, 41).ok());
  REQUIRE(job.join(1, 2, 42).ok());
  REQUIRE(job.submit(submission(0, "g")).ok());
  auto orphaned = job.leave(1);
  REQUIRE(orphaned.size() == 1);
  CHECK(orphaned[0].missing_ranks() == std::vector<std::uint32_t>{1});
  auto later = job.submit(submission(0, "h"));
  CHECK(later.status().code() == StatusCode::kPeerLost);
  CHECK(later.status().message().find("local rank 1 (pid 42) disconnected") != std::string::npos);
  CHECK(job.join(1, 2, 43).message().find("shutting down") != std::string::npos);
  job.leave(0);
  CHECK(job.connected() == 0);
}

TEST_CASE("take_expired removes only collectives past the timeout") {
  local::Job job("j", 2);
  REQUIRE(job.join(0, 2, 1).ok());
  REQUIRE(job.join(1, 2, 2).ok());
  auto old = submission(0, "old");
  old.submitted = Clock::now() - std::chrono::seconds(10);
  REQUIRE(job.submit(std::move(old)).ok());
  REQUIRE(job.submit(submission(0, "new")).ok());
  auto expired = job.take_expired(Clock::now(), std::chrono::seconds(5));
  REQUIRE(expired.size() == 1);
  CHECK(expired[0].name == "old");
  CHECK(job.pending().count("new") == 1);
}

}  // namespace test_service_local_job
