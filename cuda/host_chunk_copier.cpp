#include "cuda/host_chunk_copier.h"

#include <cstring>

namespace ringsync::cuda {

HostChunkCopier::HostChunkCopier() : worker_([this] { run(); }) {}

HostChunkCopier::~HostChunkCopier() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  work_.notify_all();
  worker_.join();
}

Status HostChunkCopier::submit(std::uint64_t ticket, Direction, void* dst, const void* src,
                               std::size_t bytes) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return Status::Closed("host chunk copier is shutting down");
    jobs_.push_back({ticket, dst, src, bytes});
  }
  work_.notify_one();
  return Status::Ok();
}

void HostChunkCopier::poll(std::vector<Done>& done) {
  std::lock_guard lock(mu_);
  for (auto& d : finished_) done.push_back(std::move(d));
  finished_.clear();
}

void HostChunkCopier::set_wakeup(std::function<void()> wakeup) {
  std::lock_guard lock(mu_);
  wakeup_ = std::move(wakeup);
}

Status HostChunkCopier::drain() {
  std::unique_lock lock(mu_);
  idle_.wait(lock, [this] { return jobs_.empty() && !busy_; });
  return Status::Ok();
}

void HostChunkCopier::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    work_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stopping, nothing left
    const Job job = jobs_.front();
    jobs_.pop_front();
    busy_ = true;
    lock.unlock();
    if (job.bytes > 0) std::memcpy(job.dst, job.src, job.bytes);
    lock.lock();
    busy_ = false;
    finished_.push_back({job.ticket, Status::Ok()});
    const auto wakeup = wakeup_;
    idle_.notify_all();
    if (wakeup) {
      lock.unlock();
      wakeup();
      lock.lock();
    }
  }
}

}  // namespace ringsync::cuda
