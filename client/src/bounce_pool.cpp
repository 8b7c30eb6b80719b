#include "client/src/bounce_pool.h"

#include <bit>
#include <limits>

namespace ringsync::client {

std::optional<std::size_t> BouncePool::size_class(std::size_t bytes) {
  constexpr std::size_t kLargestClass = std::size_t{1}
                                        << (std::numeric_limits<std::size_t>::digits - 1);
  if (bytes > kLargestClass) return std::nullopt;
  return std::max(kMinClassBytes, std::bit_ceil(bytes));
}

std::optional<BounceBuffer> BouncePool::take(std::size_t size_class) {
  std::lock_guard lock(mu_);
  auto it = idle_.find(size_class);
  if (it == idle_.end() || it->second.empty()) return std::nullopt;
  BounceBuffer buffer = std::move(it->second.back());
  it->second.pop_back();
  idle_bytes_ -= buffer.size_class;
  return buffer;
}

std::optional<BounceBuffer> BouncePool::give_back(BounceBuffer buffer) {
  std::lock_guard lock(mu_);
  auto& same_class = idle_[buffer.size_class];
  const bool class_empty = same_class.empty();
  const bool fits =
      same_class.size() < kMaxIdlePerClass && idle_bytes_ + buffer.size_class <= kMaxIdleBytes;
  if (!class_empty && !fits) return buffer;
  idle_bytes_ += buffer.size_class;
  same_class.push_back(std::move(buffer));
  return std::nullopt;
}

std::vector<BounceBuffer> BouncePool::drain() {
  std::lock_guard lock(mu_);
  std::vector<BounceBuffer> all;
  for (auto& [size_class, buffers] : idle_)
    for (auto& b : buffers) all.push_back(std::move(b));
  idle_.clear();
  idle_bytes_ = 0;
  return all;
}

std::size_t BouncePool::idle_bytes() const {
  std::lock_guard lock(mu_);
  return idle_bytes_;
}

std::size_t BouncePool::idle_count() const {
  std::lock_guard lock(mu_);
  std::size_t n = 0;
  for (const auto& [size_class, buffers] : idle_) n += buffers.size();
  return n;
}

}  // namespace ringsync::client
