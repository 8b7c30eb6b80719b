// A ChunkCopier over host memory: memcpy on its own thread, in submission order. It
// stands in for the GPU copy engine wherever there is none (CI, tests), so the
// staging pipeline's logic runs for real there.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "cuda/chunk_copier.h"

namespace ringsync::cuda {

class HostChunkCopier final : public ChunkCopier {
 public:
  HostChunkCopier();
  ~HostChunkCopier() override;

  Status pin(void*, std::size_t) override { return Status::Ok(); }
  void unpin(void*) override {}
  Status submit(std::uint64_t ticket, Direction direction, void* dst, const void* src,
                std::size_t bytes) override;
  void poll(std::vector<Done>& done) override;
  void set_wakeup(std::function<void()> wakeup) override;
  Status drain() override;

 private:
  struct Job {
    std::uint64_t ticket;
    void* dst;
    const void* src;
    std::size_t bytes;
  };
  void run();

  std::mutex mu_;
  std::condition_variable work_;  // jobs queued or stopping
  std::condition_variable idle_;  // a job finished
  std::deque<Job> jobs_;
  std::vector<Done> finished_;
  std::function<void()> wakeup_;
  bool busy_ = false;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace ringsync::cuda
