// The single-node GPU data path (run_on_device) over host memory posing as
// device memory: results for odd rank counts, uneven counts and in-place
// buffers, and what a failing device step does.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "service/device/collective.h"
#include "service/host_device_backend.h"

namespace test_service_device_collective {

using namespace ringsync;
using namespace ringsync::service;
using ringsync::test::HostDeviceBackend;

namespace {

std::vector<std::int32_t> random_ints(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::int32_t> dist(-1000, 1000);
  std::vector<std::int32_t> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

std::byte* bytes(std::vector<std::int32_t>& v) { return reinterpret_cast<std::byte*>(v.data()); }

Status run(const collective::LocalPlan& plan, HostDeviceBackend& backend) {
  auto queue = backend.queue(0);
  REQUIRE(queue.ok());
  return device::run_on_device(plan, **queue);
}

}  // namespace

TEST_CASE("allreduce on the device: L inputs reduced into every output, in and out of place") {
  for (std::size_t ranks : {1u, 2u, 3u, 7u}) {
    for (std::size_t count : {1u, 7u, 1000u}) {
      for (bool in_place : {false, true}) {
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAvg}) {
          CAPTURE(ranks);
          CAPTURE(count);
          CAPTURE(in_place);
          CAPTURE(static_cast<int>(op));
          std::vector<std::vector<std::int32_t>> send(ranks), recv(ranks);
          std::vector<std::int32_t> expected(count);
          for (std::size_t r = 0; r < ranks; ++r) {
            send[r] = random_ints(count, static_cast<std::uint32_t>(r + 11 * count));
            recv[r].assign(count, -7);
          }
          for (std::size_t i = 0; i < count; ++i) {
            std::int64_t acc = op == ReduceOp::kMax ? INT32_MIN : 0;
            for (std::size_t r = 0; r < ranks; ++r)
              acc = op == ReduceOp::kMax ? std::max<std::int64_t>(acc, send[r][i])
                                         : acc + send[r][i];
            if (op == ReduceOp::kAvg) acc /= static_cast<std::int64_t>(ranks);
            expected[i] = static_cast<std::int32_t>(acc);
          }
          collective::LocalPlan plan;
          plan.kind = wire::CollectiveKind::kAllreduce;
          plan.dtype = DType::kI32;
          plan.op = op;
          plan.count = count;
          for (std::size_t r = 0; r < ranks; ++r)
            plan.ranks.push_back(in_place ? collective::Contribution{bytes(send[r]), bytes(send[r])}
                                          : collective::Contribution{bytes(send[r]), bytes(recv[r])});
          HostDeviceBackend backend;
          REQUIRE(run(plan, backend).ok());
          CHECK(backend.log.reduces == 1);
          CHECK(backend.log.synchronizations == 1);
          for (std::size_t r = 0; r < ranks; ++r) CHECK((in_place ? send[r] : recv[r]) == expected);
        }
      }
    }
  }
}

TEST_CASE("broadcast on the device copies the root's input to every output") {
  for (std::size_t ranks : {1u, 2u, 3u, 7u}) {
    for (std::uint32_t root = 0; root < ranks; root += 2) {
      for (bool in_place : {false, true}) {
        CAPTURE(ranks);
        CAPTURE(root);
        CAPTURE(in_place);
        const std::size_t count = 11;
        std::vector<std::vector<std::int32_t>> send(ranks), recv(ranks);
        for (std::size_t r = 0; r < ranks; ++r) {
          send[r] = random_ints(count, static_cast<std::uint32_t>(r + 1));
          recv[r].assign(count, 0);
        }
        const auto expected = send[root];
        collective::LocalPlan plan;
        plan.kind = wire::CollectiveKind::kBroadcast;
        plan.dtype = DType::kI32;
        plan.count = count;
        plan.root = root;
        for (std::size_t r = 0; r < ranks; ++r)
          plan.ranks.push_back(in_place ? collective::Contribution{bytes(send[r]), bytes(send[r])}
                                        : collective::Contribution{bytes(send[r]), bytes(recv[r])});
        HostDeviceBackend backend;
        REQUIRE(run(plan, backend).ok());
        CHECK(backend.log.reduces == 0);
        for (std::size_t r = 0; r < ranks; ++r) CHECK((in_place ? send[r] : recv[r]) == expected);
      }
    }
  }
}

TEST_CASE("allgather on the device fills every output in rank order, in place too") {
  for (std::size_t ranks : {1u, 2u, 3u, 7u}) {
    for (bool in_place : {false, true}) {
      CAPTURE(ranks);
      CAPTURE(in_place);
      const std::size_t count = 5;
      std::vector<std::vector<std::int32_t>> send(ranks), recv(ranks);
      std::vector<std::int32_t> expected;
      for (std::size_t r = 0; r < ranks; ++r) {
        send[r] = random_ints(count, static_cast<std::uint32_t>(r + 100));
        expected.insert(expected.end(), send[r].begin(), send[r].end());
      }
      collective::LocalPlan plan;
      plan.kind = wire::CollectiveKind::kAllgather;
      plan.dtype = DType::kI32;
      plan.count = count;
      for (std::size_t r = 0; r < ranks; ++r) {
        recv[r].assign(count * ranks, -1);
        if (in_place)
          std::copy(send[r].begin(), send[r].end(), recv[r].begin() + r * count);
        const std::byte* own = in_place ? bytes(recv[r]) + r * count * sizeof(std::int32_t)
                                        : bytes(send[r]);
        plan.ranks.push_back(collective::Contribution{own, bytes(recv[r])});
      }
      HostDeviceBackend backend;
      REQUIRE(run(plan, backend).ok());
      for (std::size_t r = 0; r < ranks; ++r) CHECK(recv[r] == expected);
    }
  }
}

TEST_CASE("zero elements and barriers queue nothing; a failing step is reported") {
  std::vector<std::int32_t> a(4), b(4);
  collective::LocalPlan plan;
  plan.kind = wire::CollectiveKind::kAllreduce;
  plan.dtype = DType::kI32;
  plan.count = 0;
  plan.ranks = {collective::Contribution{bytes(a), bytes(a)}, collective::Contribution{bytes(b), bytes(b)}};
  HostDeviceBackend backend;
  CHECK(run(plan, backend).ok());
  plan.kind = wire::CollectiveKind::kBarrier;
  CHECK(run(plan, backend).ok());
  CHECK(backend.log.reduces + backend.log.device_copies + backend.log.synchronizations == 0);

  plan.kind = wire::CollectiveKind::kAllreduce;
  plan.count = 4;
  backend.fail_operation(2);  // the copy to rank 1's output
  Status failed = run(plan, backend);
  CHECK(failed.code() == StatusCode::kInternal);
  CHECK(failed.message() == "injected device failure");
}

TEST_CASE("local ranks on a GPU that the queue's GPU cannot reach are refused before any work") {
  HostDeviceBackend backend;
  CHECK(device::check_reachable({0, 0, -1}, 0, backend).ok());  // -1: a rank without a buffer
  CHECK(device::check_reachable({1, 2, 3}, 1, backend).ok());   // every pair reachable here
  backend.unreachable_from = 1;
  backend.unreachable_to = 3;
  const Status refused = device::check_reachable({1, 2, 3}, 1, backend);
  CHECK(refused.code() == StatusCode::kInvalidArgument);
  CHECK(refused.message().find("local rank 2's buffers are on GPU 3, which GPU 1") !=
        std::string::npos);
  CHECK(backend.log.queues == 0);
}

}  // namespace test_service_device_collective
