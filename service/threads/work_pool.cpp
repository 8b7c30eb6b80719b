#include "service/threads/work_pool.h"

#include <pthread.h>

#include <atomic>

namespace ringsync::service::threads {

struct WorkPool::Job {
  std::size_t n = 0;
  std::size_t next = 0;  // next unclaimed piece, guarded by the pool mutex
  std::atomic<std::size_t> finished{0};
  std::function<void(std::size_t)> piece;
  std::function<void()> done;
};

WorkPool::WorkPool(int threads) {
  if (threads < 1) threads = 1;
  workers_.reserve(static_cast<std::size_t>(threads));
  for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
}

WorkPool::~WorkPool() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void WorkPool::run(std::size_t n, std::function<void(std::size_t)> piece,
                   std::function<void()> done) {
  auto job = std::make_shared<Job>();
  job->n = n;
  job->piece = std::move(piece);
  job->done = std::move(done);
  {
    std::lock_guard lock(mu_);
    jobs_.push_back(std::move(job));
  }
  if (n > 1)
    cv_.notify_all();
  else
    cv_.notify_one();
}

void WorkPool::work() {
  ::pthread_setname_np(::pthread_self(), "rs-pool");  // in top -H, perf, /proc
  for (;;) {
    std::shared_ptr<Job> job;
    std::size_t index = 0;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // stopping and drained
      job = jobs_.front();
      if (job->n == 0) {
        jobs_.pop_front();
      } else {
        index = job->next++;
        if (job->next == job->n) jobs_.pop_front();
      }
    }
    if (job->n == 0) {
      job->done();
      continue;
    }
    if (!cancelled()) job->piece(index);
    if (job->finished.fetch_add(1, std::memory_order_acq_rel) + 1 == job->n) job->done();
  }
}

}  // namespace ringsync::service::threads
