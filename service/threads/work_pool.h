// Worker threads for the data path (reductions and copies), so the control
// thread never touches bulk data. A job is n independent pieces; the thread
// that finishes the last piece calls done().
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace ringsync::service::threads {

class WorkPool {
 public:
  explicit WorkPool(int threads);
  ~WorkPool();  // finishes queued jobs, then joins
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;

  // Runs piece(i) for every i in [0, n), in any order and on any worker, then done().
  // n == 0 calls done() on a worker.
  void run(std::size_t n, std::function<void(std::size_t)> piece, std::function<void()> done);

  int threads() const { return static_cast<int>(workers_.size()); }

  // From now on pieces are skipped (done() is still called): for shutdown, so
  // queued data movement stops instead of running to the end.
  void cancel() { cancelled_.store(true, std::memory_order_relaxed); }
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

 private:
  struct Job;
  void work();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> jobs_;
  bool stopping_ = false;
  std::atomic<bool> cancelled_{false};
  std::vector<std::thread> workers_;
};

}  // namespace ringsync::service::threads
