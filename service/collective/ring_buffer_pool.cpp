#include "service/collective/ring_buffer_pool.h"

namespace ringsync::service::collective {

std::shared_ptr<RingBufferPool> RingBufferPool::create(std::size_t keep_bytes) {
  return std::shared_ptr<RingBufferPool>(new RingBufferPool(keep_bytes));
}

std::shared_ptr<std::byte[]> RingBufferPool::acquire(std::size_t bytes) {
  if (bytes < kMinPooledBytes) return std::shared_ptr<std::byte[]>(new std::byte[bytes]);
  std::unique_ptr<std::byte[]> data;
  std::size_t size = bytes;
  {
    std::lock_guard lock(mutex_);
    auto it = free_.lower_bound(bytes);
    if (it != free_.end() && it->first <= 2 * bytes) {
      size = it->first;
      data = std::move(it->second);
      kept_ -= size;
      free_.erase(it);
    }
  }
  if (!data) data.reset(new std::byte[bytes]);
  std::weak_ptr<RingBufferPool> pool = weak_from_this();
  return std::shared_ptr<std::byte[]>(data.release(), [pool, size](std::byte* p) {
    if (auto self = pool.lock()) return self->give_back(p, size);
    delete[] p;
  });
}

void RingBufferPool::give_back(std::byte* data, std::size_t bytes) {
  std::unique_ptr<std::byte[]> owned(data);
  std::lock_guard lock(mutex_);
  if (kept_ + bytes > keep_bytes_) return;  // freed as `owned` goes
  kept_ += bytes;
  free_.emplace(bytes, std::move(owned));
}

std::size_t RingBufferPool::kept_bytes() const {
  std::lock_guard lock(mutex_);
  return kept_;
}

std::size_t RingBufferPool::kept_buffers() const {
  std::lock_guard lock(mutex_);
  return free_.size();
}

}  // namespace ringsync::service::collective
