// The pinned host memory a staging pipeline moves chunks through: `depth` slots of
// `chunk_bytes` each, allocated and pinned once and reused by every transfer
// (pinning costs far more than one copy). Or a view: slots laid back to back over
// memory someone else owns and pinned, so that chunk k of a transfer lands at
// offset k * chunk_bytes (a host buffer as long as the device one, which the ring
// then runs over in place).
#pragma once

#include <cstddef>
#include <memory>

#include "common/status.h"
#include "cuda/chunk_copier.h"

namespace ringsync::cuda {

class StagingBuffers {
 public:
  // `copier` pins the memory and must outlive the buffers. chunk_bytes and depth >= 1.
  static Result<StagingBuffers> create(ChunkCopier& copier, std::size_t chunk_bytes,
                                       std::size_t depth);
  // Slots i = memory + i * chunk_bytes, i < depth; nothing is allocated, pinned or
  // freed. chunk_bytes and depth >= 1.
  static StagingBuffers view(std::byte* memory, std::size_t chunk_bytes, std::size_t depth);
  StagingBuffers(StagingBuffers&&) noexcept;
  StagingBuffers& operator=(StagingBuffers&&) noexcept;
  StagingBuffers(const StagingBuffers&) = delete;
  StagingBuffers& operator=(const StagingBuffers&) = delete;
  ~StagingBuffers();

  std::size_t chunk_bytes() const { return chunk_bytes_; }
  std::size_t depth() const { return depth_; }
  std::byte* slot(std::size_t i) const { return memory_ + i * stride_; }

 private:
  StagingBuffers() = default;
  void release();

  ChunkCopier* copier_ = nullptr;  // null for a view: the memory is not ours
  std::byte* memory_ = nullptr;
  std::size_t chunk_bytes_ = 0;
  std::size_t stride_ = 0;  // chunk_bytes_ rounded up to a page
  std::size_t depth_ = 0;
};

}  // namespace ringsync::cuda
