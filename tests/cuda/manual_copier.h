// A ChunkCopier the test drives by hand: copies wait until complete_next(), so a test
// can hold the pipeline at any point and look at what it has started. Failures can
// be injected at submit or at completion of a given ticket.
#pragma once

#include <cstring>
#include <deque>
#include <optional>

#include "cuda/chunk_copier.h"

namespace ringsync::cuda::test {

class ManualCopier final : public ChunkCopier {
 public:
  struct Job {
    std::uint64_t ticket;
    Direction direction;
    void* dst;
    const void* src;
    std::size_t bytes;
  };

  Status pin(void*, std::size_t) override {
    ++pins;
    return Status::Ok();
  }
  void unpin(void*) override { ++unpins; }
  Status submit(std::uint64_t ticket, Direction direction, void* dst, const void* src,
                std::size_t bytes) override {
    if (fail_submit == ticket) return Status::Internal("injected submit failure");
    pending.push_back({ticket, direction, dst, src, bytes});
    submitted.push_back(ticket);
    return Status::Ok();
  }
  void poll(std::vector<Done>& done) override {
    for (auto& d : finished) done.push_back(std::move(d));
    finished.clear();
  }
  void set_wakeup(std::function<void()>) override {}
  ringsync::Status drain() override {
    while (!pending.empty()) complete_next();
    return ringsync::Status::Ok();
  }

  // Performs the oldest pending copy; false when none is pending.
  bool complete_next() {
    if (pending.empty()) return false;
    const Job job = pending.front();
    pending.pop_front();
    if (fail_copy == job.ticket) {
      finished.push_back({job.ticket, Status::Internal("injected copy failure")});
      return true;
    }
    if (job.bytes > 0) std::memcpy(job.dst, job.src, job.bytes);
    finished.push_back({job.ticket, Status::Ok()});
    return true;
  }

  std::deque<Job> pending;
  std::vector<Done> finished;
  std::vector<std::uint64_t> submitted;
  std::optional<std::uint64_t> fail_submit;
  std::optional<std::uint64_t> fail_copy;
  int pins = 0;
  int unpins = 0;
};

}  // namespace ringsync::cuda::test
