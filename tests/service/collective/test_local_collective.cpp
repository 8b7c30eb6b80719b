#include <doctest/doctest.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <random>
#include <vector>

#include "common/reduce.h"
#include "service/collective/local_collective.h"
#include "service/threads/work_pool.h"

namespace test_service_collective_local_collective {

using namespace ringsync;
using namespace ringsync::service;

namespace {

// Runs every piece of a collective on a real WorkPool and waits for done().
void run_on_pool(threads::WorkPool& pool, const collective::LocalCollective& work) {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  pool.run(
      work.pieces(), [&](std::size_t i) { work.run_piece(i); },
      [&] {
        std::lock_guard lock(mu);
        done = true;
        cv.notify_one();
      });
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return done; });
}

std::vector<std::int32_t> random_ints(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::int32_t> dist(-1000, 1000);
  std::vector<std::int32_t> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

}  // namespace

TEST_CASE("allreduce over L local ranks matches the reference, in and out of place") {
  threads::WorkPool pool(3);
  for (std::size_t ranks : {1u, 2u, 3u, 4u, 7u}) {
    for (std::size_t count : {0u, 1u, 2u, 7u, 1000u, 4099u}) {
      for (bool in_place : {false, true}) {
        CAPTURE(ranks);
        CAPTURE(count);
        CAPTURE(in_place);
        std::vector<std::vector<std::int32_t>> send(ranks), recv(ranks);
        std::vector<std::int32_t> expected(count, 0);
        collective::LocalPlan plan;
        plan.kind = wire::CollectiveKind::kAllreduce;
        plan.dtype = DType::kI32;
        plan.op = ReduceOp::kSum;
        plan.count = count;
        for (std::size_t r = 0; r < ranks; ++r) {
          send[r] = random_ints(count, static_cast<std::uint32_t>(r * 31 + count));
          for (std::size_t i = 0; i < count; ++i) expected[i] += send[r][i];
          recv[r].assign(count, -7);
          std::byte* s = reinterpret_cast<std::byte*>(send[r].data());
          std::byte* d = in_place ? s : reinterpret_cast<std::byte*>(recv[r].data());
          plan.ranks.push_back({s, d});
        }
        // 64-byte chunks force many pieces and uneven tails.
        collective::LocalCollective work(plan, 64);
        CHECK(work.pieces() == (count * 4 + 63) / 64);
        run_on_pool(pool, work);
        for (std::size_t r = 0; r < ranks; ++r) CHECK((in_place ? send[r] : recv[r]) == expected);
      }
    }
  }
}

TEST_CASE("allreduce avg and max use the reduction kernels' rules") {
  threads::WorkPool pool(2);
  std::vector<float> a{1, 2, 3, -4}, b{3, 2, 1, 8}, out_a(4), out_b(4);
  collective::LocalPlan plan{wire::CollectiveKind::kAllreduce, DType::kF32, ReduceOp::kAvg, 4, 0, {}};
  plan.ranks = {{reinterpret_cast<std::byte*>(a.data()), reinterpret_cast<std::byte*>(out_a.data())},
                {reinterpret_cast<std::byte*>(b.data()), reinterpret_cast<std::byte*>(out_b.data())}};
  run_on_pool(pool, collective::LocalCollective(plan, 1 << 20));
  CHECK(out_a == std::vector<float>{2, 2, 2, 2});
  CHECK(out_b == out_a);
  plan.op = ReduceOp::kMax;
  run_on_pool(pool, collective::LocalCollective(plan, 4));
  CHECK(out_a == std::vector<float>{3, 2, 3, 8});
  CHECK(out_b == out_a);
}

TEST_CASE("broadcast copies the root's data to every rank; in place on the root") {
  threads::WorkPool pool(2);
  for (std::size_t ranks : {1u, 2u, 3u, 7u}) {
    for (std::uint32_t root = 0; root < ranks; root += 2) {
      const std::size_t count = 333;
      auto data = random_ints(count, root + 1);
      std::vector<std::vector<std::int32_t>> recv(ranks, std::vector<std::int32_t>(count, 0));
      recv[root] = data;  // root broadcasts in place
      collective::LocalPlan plan{wire::CollectiveKind::kBroadcast, DType::kI32, ReduceOp::kSum, count, root, {}};
      for (std::size_t r = 0; r < ranks; ++r) {
        auto* d = reinterpret_cast<std::byte*>(recv[r].data());
        plan.ranks.push_back({r == root ? d : nullptr, d});
      }
      run_on_pool(pool, collective::LocalCollective(plan, 100));
      for (std::size_t r = 0; r < ranks; ++r) CHECK(recv[r] == data);
    }
  }
}

TEST_CASE("allgather places rank j's data in slot j of every rank, also in place") {
  threads::WorkPool pool(2);
  for (std::size_t ranks : {1u, 2u, 3u, 4u, 7u}) {
    for (std::size_t count : {0u, 1u, 5u, 129u}) {
      std::vector<std::vector<std::int32_t>> send(ranks), recv(ranks);
      std::vector<std::int32_t> expected;
      collective::LocalPlan plan{wire::CollectiveKind::kAllgather, DType::kI32, ReduceOp::kSum, count, 0, {}};
      for (std::size_t r = 0; r < ranks; ++r) {
        send[r] = random_ints(count, static_cast<std::uint32_t>(100 + r));
        expected.insert(expected.end(), send[r].begin(), send[r].end());
        recv[r].assign(count * ranks, 0);
      }
      for (std::size_t r = 0; r < ranks; ++r) {
        auto* d = reinterpret_cast<std::byte*>(recv[r].data());
        const bool in_place = r % 2 == 1;
        if (in_place && count > 0)
          std::memcpy(recv[r].data() + r * count, send[r].data(), count * 4);
        const std::byte* s = in_place ? d + r * count * 4
                                      : reinterpret_cast<const std::byte*>(send[r].data());
        plan.ranks.push_back({s, d});
      }
      collective::LocalCollective work(plan, 16);
      CHECK(work.pieces() == ranks * ((count * 4 + 15) / 16));
      run_on_pool(pool, work);
      for (std::size_t r = 0; r < ranks; ++r) CHECK(recv[r] == expected);
    }
  }
}

TEST_CASE("barrier has no data movement") {
  collective::LocalPlan plan{wire::CollectiveKind::kBarrier, DType::kU8, ReduceOp::kSum, 0, 0, {{}, {}}};
  CHECK(collective::LocalCollective(plan, 1024).pieces() == 0);
}

TEST_CASE("reduce-scatter gives rank j block j reduced over every rank, also in place") {
  threads::WorkPool pool(2);
  for (std::size_t ranks : {1u, 2u, 3u, 4u, 7u}) {
    for (std::size_t count : {0u, 1u, 5u, 129u}) {
      CAPTURE(ranks);
      CAPTURE(count);
      std::vector<std::vector<std::int32_t>> send(ranks), recv(ranks);
      std::vector<std::int32_t> sum(count * ranks, 0);
      collective::LocalPlan plan{wire::CollectiveKind::kReduceScatter, DType::kI32, ReduceOp::kSum, count, 0, {}};
      for (std::size_t r = 0; r < ranks; ++r) {
        send[r] = random_ints(count * ranks, static_cast<std::uint32_t>(200 + r));
        for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += send[r][i];
        recv[r].assign(count, -5);
      }
      for (std::size_t r = 0; r < ranks; ++r) {
        auto* s = reinterpret_cast<std::byte*>(send[r].data());
        const bool in_place = r % 2 == 1;  // the output is the rank's own block of its input
        plan.ranks.push_back({s, in_place ? s + r * count * 4 : reinterpret_cast<std::byte*>(recv[r].data())});
      }
      collective::LocalCollective work(plan, 16);
      CHECK(work.pieces() == ranks * ((count * 4 + 15) / 16));
      run_on_pool(pool, work);
      for (std::size_t r = 0; r < ranks; ++r) {
        CAPTURE(r);
        const std::int32_t* got = r % 2 == 1 ? send[r].data() + r * count : recv[r].data();
        CHECK(std::vector<std::int32_t>(got, got + count) ==
              std::vector<std::int32_t>(sum.begin() + static_cast<std::ptrdiff_t>(r * count),
                                        sum.begin() + static_cast<std::ptrdiff_t>((r + 1) * count)));
      }
    }
  }
}

TEST_CASE("alltoall moves block j of rank i to block i of rank j") {
  threads::WorkPool pool(2);
  for (std::size_t ranks : {1u, 2u, 3u, 4u, 7u}) {
    for (std::size_t count : {0u, 1u, 5u, 129u}) {
      CAPTURE(ranks);
      CAPTURE(count);
      std::vector<std::vector<std::int32_t>> send(ranks), recv(ranks);
      collective::LocalPlan plan{wire::CollectiveKind::kAlltoall, DType::kI32, ReduceOp::kSum, count, 0, {}};
      for (std::size_t r = 0; r < ranks; ++r) {
        send[r] = random_ints(count * ranks, static_cast<std::uint32_t>(300 + r));
        recv[r].assign(count * ranks, -5);
        plan.ranks.push_back({reinterpret_cast<std::byte*>(send[r].data()), reinterpret_cast<std::byte*>(recv[r].data())});
      }
      collective::LocalCollective work(plan, 16);
      CHECK(work.pieces() == ranks * ranks * ((count * 4 + 15) / 16));
      run_on_pool(pool, work);
      for (std::size_t j = 0; j < ranks; ++j)
        for (std::size_t i = 0; i < ranks; ++i)
          for (std::size_t e = 0; e < count; ++e) CHECK(recv[j][i * count + e] == send[i][j * count + e]);
    }
  }
}

TEST_CASE("reduce leaves the reduction in the root's output alone, also in place") {
  threads::WorkPool pool(2);
  for (std::size_t ranks : {1u, 2u, 3u, 7u}) {
    for (std::uint32_t root = 0; root < ranks; root += 2) {
      for (std::size_t count : {0u, 1u, 129u}) {
        CAPTURE(ranks);
        CAPTURE(root);
        CAPTURE(count);
        std::vector<std::vector<std::int32_t>> send(ranks);
        std::vector<std::int32_t> sum(count, 0), out(count, -5);
        collective::LocalPlan plan{wire::CollectiveKind::kReduce, DType::kI32, ReduceOp::kSum, count, root, {}};
        for (std::size_t r = 0; r < ranks; ++r) {
          send[r] = random_ints(count, static_cast<std::uint32_t>(400 + r));
          for (std::size_t i = 0; i < count; ++i) sum[i] += send[r][i];
        }
        const bool in_place = root % 4 == 0;  // the root's input is its output
        for (std::size_t r = 0; r < ranks; ++r) {
          auto* s = reinterpret_cast<std::byte*>(send[r].data());
          std::byte* recv = r != root ? nullptr : in_place ? s : reinterpret_cast<std::byte*>(out.data());
          plan.ranks.push_back({s, recv});
        }
        const std::vector<std::int32_t> other_input = send[(root + 1) % ranks];
        run_on_pool(pool, collective::LocalCollective(plan, 16));
        CHECK((in_place ? send[root] : out) == sum);
        if (ranks > 1 && (root + 1) % ranks != root) CHECK(send[(root + 1) % ranks] == other_input);  // inputs unchanged
      }
    }
  }
}

TEST_CASE("gather places rank j's data in slot j of the root's output alone, also in place") {
  threads::WorkPool pool(2);
  for (std::size_t ranks : {1u, 2u, 3u, 7u}) {
    for (std::uint32_t root = 0; root < ranks; root += 3) {
      for (std::size_t count : {0u, 1u, 129u}) {
        CAPTURE(ranks);
        CAPTURE(root);
        CAPTURE(count);
        std::vector<std::vector<std::int32_t>> send(ranks);
        std::vector<std::int32_t> expected, out(count * ranks, -5);
        collective::LocalPlan plan{wire::CollectiveKind::kGather, DType::kI32, ReduceOp::kSum, count, root, {}};
        for (std::size_t r = 0; r < ranks; ++r) {
          send[r] = random_ints(count, static_cast<std::uint32_t>(500 + r));
          expected.insert(expected.end(), send[r].begin(), send[r].end());
        }
        const bool in_place = ranks % 2 == 1;  // the root's input sits in its slot of the output
        if (in_place && count > 0) std::memcpy(out.data() + root * count, send[root].data(), count * 4);
        auto* o = reinterpret_cast<std::byte*>(out.data());
        for (std::size_t r = 0; r < ranks; ++r) {
          const std::byte* s = r == root && in_place ? o + root * count * 4
                                                     : reinterpret_cast<const std::byte*>(send[r].data());
          plan.ranks.push_back({s, r == root ? o : nullptr});
        }
        collective::LocalCollective work(plan, 16);
        CHECK(work.pieces() == ranks * ((count * 4 + 15) / 16));
        run_on_pool(pool, work);
        CHECK(out == expected);
      }
    }
  }
}

TEST_CASE("scatter gives rank j block j of the root's input, also in place on the root") {
  threads::WorkPool pool(2);
  for (std::size_t ranks : {1u, 2u, 3u, 7u}) {
    for (std::uint32_t root = 0; root < ranks; root += 3) {
      for (std::size_t count : {0u, 1u, 129u}) {
        CAPTURE(ranks);
        CAPTURE(root);
        CAPTURE(count);
        const std::vector<std::int32_t> input = random_ints(count * ranks, 600 + root);
        std::vector<std::int32_t> send = input;
        std::vector<std::vector<std::int32_t>> recv(ranks, std::vector<std::int32_t>(count, -5));
        collective::LocalPlan plan{wire::CollectiveKind::kScatter, DType::kI32, ReduceOp::kSum, count, root, {}};
        const bool in_place = ranks % 2 == 1;  // the root's output is its own block of its input
        auto* s = reinterpret_cast<std::byte*>(send.data());
        for (std::size_t r = 0; r < ranks; ++r) {
          std::byte* out = r == root && in_place ? s + root * count * 4 : reinterpret_cast<std::byte*>(recv[r].data());
          plan.ranks.push_back({r == root ? s : nullptr, out});
        }
        run_on_pool(pool, collective::LocalCollective(plan, 16));
        for (std::size_t r = 0; r < ranks; ++r) {
          CAPTURE(r);
          const std::int32_t* got = r == root && in_place ? send.data() + root * count : recv[r].data();
          CHECK(std::vector<std::int32_t>(got, got + count) ==
                std::vector<std::int32_t>(input.begin() + static_cast<std::ptrdiff_t>(r * count),
                                          input.begin() + static_cast<std::ptrdiff_t>((r + 1) * count)));
        }
        CHECK(send == input);
      }
    }
  }
}

}  // namespace test_service_collective_local_collective
