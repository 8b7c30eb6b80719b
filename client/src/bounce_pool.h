// Shared buffers that carry plain host memory to the daemon (one copy in, one
// copy out). Buffers come in power-of-two size classes and are reused; the pool
// keeps a bounded number of idle ones and hands the rest back to be freed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "common/shm.h"

namespace ringsync::client {

struct BounceBuffer {
  std::uint32_t buffer_id = 0;
  std::size_t size_class = 0;  // what was asked of the daemon; region may be larger
  shm::Region region;
};

class BouncePool {
 public:
  static constexpr std::size_t kMinClassBytes = std::size_t{64} << 10;
  // Idle buffers kept per size class, and idle bytes kept over all classes. A
  // class without an idle buffer always keeps one, so that a loop over one large
  // tensor reuses its buffer however large it is.
  static constexpr std::size_t kMaxIdlePerClass = 4;
  static constexpr std::size_t kMaxIdleBytes = std::size_t{1} << 30;

  // The smallest class that holds `bytes`: a power of two >= kMinClassBytes;
  // nullopt when no class is that large.
  static std::optional<std::size_t> size_class(std::size_t bytes);

  // An idle buffer of this class, if there is one.
  std::optional<BounceBuffer> take(std::size_t size_class);

  // Keeps `buffer` for reuse; returns it instead when the pool is full, for the
  // caller to free.
  std::optional<BounceBuffer> give_back(BounceBuffer buffer);

  // Empties the pool, returning every idle buffer.
  std::vector<BounceBuffer> drain();

  std::size_t idle_bytes() const;
  std::size_t idle_count() const;

 private:
  mutable std::mutex mu_;
  std::map<std::size_t, std::vector<BounceBuffer>> idle_;  // by size class
  std::size_t idle_bytes_ = 0;
};

}  // namespace ringsync::client
