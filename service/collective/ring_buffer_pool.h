// Ring buffers reused across operations. A fused or in-place operation needs a
// buffer of its own for the ring; allocating tens of MiB per operation costs a
// page fault per 4 KiB on first touch (measured: a fresh 64 MiB buffer added
// ~30 ms to a 140 ms allreduce) and returns the memory to the kernel each time.
// Released buffers are kept up to a byte budget, so an idle daemon holds at most
// that much and a training loop's steady state allocates nothing.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>

namespace ringsync::service::collective {

class RingBufferPool : public std::enable_shared_from_this<RingBufferPool> {
 public:
  // Buffers below this are allocated fresh (cheap) and never kept.
  static constexpr std::size_t kMinPooledBytes = 1 << 20;

  static std::shared_ptr<RingBufferPool> create(std::size_t keep_bytes);

  // A buffer of at least `bytes` (uninitialised), from the pool when one fits
  // (no more than twice the size asked for); back to the pool when the last
  // owner drops it, or freed when the pool is full or gone.
  std::shared_ptr<std::byte[]> acquire(std::size_t bytes);

  std::size_t kept_bytes() const;
  std::size_t kept_buffers() const;

 private:
  explicit RingBufferPool(std::size_t keep_bytes) : keep_bytes_(keep_bytes) {}
  void give_back(std::byte* data, std::size_t bytes);

  mutable std::mutex mutex_;
  std::multimap<std::size_t, std::unique_ptr<std::byte[]>> free_;  // by size
  std::size_t kept_ = 0;
  const std::size_t keep_bytes_;
};

}  // namespace ringsync::service::collective
