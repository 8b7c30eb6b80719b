// The copy engine under the staging pipeline: moves one chunk between device memory
// and pinned host memory without blocking the caller. On a GPU it is a CUDA stream
// (DeviceChunkCopier); in tests and CI, a thread doing memcpy (HostChunkCopier). The
// pipeline's logic does not know which.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "common/status.h"

namespace ringsync::cuda {

class ChunkCopier {
 public:
  enum class Direction { kToHost, kToDevice };
  // A finished copy: the ticket given to submit() and how it went.
  struct Done {
    std::uint64_t ticket = 0;
    Status status;
  };

  virtual ~ChunkCopier() = default;

  // Page-locks staging memory so copies run at full speed (no-op on the host copier).
  virtual Status pin(void* host, std::size_t bytes) = 0;
  virtual void unpin(void* host) = 0;

  // Queues one copy and returns at once; its completion shows up in poll().
  // Copies run in submission order.
  virtual Status submit(std::uint64_t ticket, Direction direction, void* dst, const void* src,
                        std::size_t bytes) = 0;
  // Appends the copies finished since the last call to `done`. Never blocks.
  virtual void poll(std::vector<Done>& done) = 0;
  // Called on some other thread after each copy finishes, so the owner knows to
  // poll (e.g. by posting to its io_context). Set before the first submit().
  virtual void set_wakeup(std::function<void()> wakeup) = 0;
  // Blocks until every submitted copy has finished: for teardown, not for control loops.
  // Not ok when the device reported an error meanwhile: the copier must not be reused.
  [[nodiscard]] virtual Status drain() = 0;
};

}  // namespace ringsync::cuda
