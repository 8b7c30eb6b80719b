#include <doctest/doctest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <vector>

#include "service/threads/work_pool.h"

namespace test_service_threads_work_pool {

using ringsync::service::threads::WorkPool;

TEST_CASE("every piece runs exactly once and done() runs once, after all pieces") {
  WorkPool pool(3);
  constexpr std::size_t kJobs = 20;
  constexpr std::size_t kPieces = 257;
  std::vector<std::atomic<int>> hits(kJobs * kPieces);
  std::atomic<int> done_calls{0};
  std::atomic<bool> early_done{false};
  std::mutex mu;
  std::condition_variable cv;
  for (std::size_t j = 0; j < kJobs; ++j) {
    auto finished = std::make_shared<std::atomic<std::size_t>>(0);
    pool.run(
        kPieces,
        [&, j, finished](std::size_t i) {
          hits[j * kPieces + i].fetch_add(1);
          finished->fetch_add(1);
        },
        [&, finished] {
          if (finished->load() != kPieces) early_done = true;
          std::lock_guard lock(mu);
          ++done_calls;
          cv.notify_one();
        });
  }
  std::unique_lock lock(mu);
  cv.wait(lock, [&] { return done_calls.load() == static_cast<int>(kJobs); });
  CHECK_FALSE(early_done.load());
  for (auto& h : hits) CHECK(h.load() == 1);
}

TEST_CASE("a job of zero pieces still calls done(); destruction drains queued jobs") {
  std::atomic<int> done_calls{0};
  {
    WorkPool pool(1);
    pool.run(0, [](std::size_t) {}, [&] { ++done_calls; });
    for (int i = 0; i < 5; ++i) pool.run(3, [](std::size_t) {}, [&] { ++done_calls; });
  }
  CHECK(done_calls.load() == 6);
}

}  // namespace test_service_threads_work_pool
