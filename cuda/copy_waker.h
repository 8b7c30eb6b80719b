// Wakes a thread that drives a ChunkCopier (chunk_copier.h) whenever a copy has
// finished: callback() goes to set_wakeup(), and wait() sleeps until a wakeup
// not seen yet arrives (at most a second: a missed one costs time, not progress).
// For single-threaded drivers: the benchmark and the tests.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>

namespace ringsync::cuda {

class CopyWaker {
 public:
  std::function<void()> callback() {
    return [this] {
      std::lock_guard lock(mu_);
      ++count_;
      cv_.notify_all();
    };
  }
  void wait() {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(1), [this] { return count_ != seen_; });
    seen_ = count_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::uint64_t count_ = 0;
  std::uint64_t seen_ = 0;
};

}  // namespace ringsync::cuda
