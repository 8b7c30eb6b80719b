#include "cuda/staging_buffers.h"

#include <cstdlib>
#include <string>
#include <utility>

namespace ringsync::cuda {
namespace {

constexpr std::size_t kPage = 4096;  // page-aligned slots pin without partial pages

}  // namespace

Result<StagingBuffers> StagingBuffers::create(ChunkCopier& copier, std::size_t chunk_bytes,
                                              std::size_t depth) {
  if (chunk_bytes == 0 || depth == 0)
    return Status::InvalidArgument("staging buffers need a chunk size and a depth of at least 1");
  if (chunk_bytes > (std::size_t{1} << 40) / depth)
    return Status::InvalidArgument("staging buffers: " + std::to_string(depth) + " x " +
                                   std::to_string(chunk_bytes) + " bytes is too large");
  const std::size_t stride = (chunk_bytes + kPage - 1) / kPage * kPage;  // slots start on pages
  void* memory = std::aligned_alloc(kPage, stride * depth);
  if (memory == nullptr)
    return Status::OutOfMemory("staging buffers: cannot allocate " +
                               std::to_string(stride * depth) + " bytes of host memory");
  Status pinned = copier.pin(memory, stride * depth);
  if (!pinned.ok()) {
    std::free(memory);
    return Status(pinned.code(), "pinning staging buffers: " + pinned.message());
  }
  StagingBuffers buffers;
  buffers.copier_ = &copier;
  buffers.memory_ = static_cast<std::byte*>(memory);
  buffers.chunk_bytes_ = chunk_bytes;
  buffers.stride_ = stride;
  buffers.depth_ = depth;
  return buffers;
}

StagingBuffers StagingBuffers::view(std::byte* memory, std::size_t chunk_bytes, std::size_t depth) {
  StagingBuffers buffers;
  buffers.memory_ = memory;
  buffers.chunk_bytes_ = chunk_bytes;
  buffers.stride_ = chunk_bytes;
  buffers.depth_ = depth;
  return buffers;
}

StagingBuffers::StagingBuffers(StagingBuffers&& other) noexcept
    : copier_(std::exchange(other.copier_, nullptr)),
      memory_(std::exchange(other.memory_, nullptr)),
      chunk_bytes_(other.chunk_bytes_),
      stride_(other.stride_),
      depth_(other.depth_) {}

StagingBuffers& StagingBuffers::operator=(StagingBuffers&& other) noexcept {
  if (this != &other) {
    release();
    copier_ = std::exchange(other.copier_, nullptr);
    memory_ = std::exchange(other.memory_, nullptr);
    chunk_bytes_ = other.chunk_bytes_;
    stride_ = other.stride_;
    depth_ = other.depth_;
  }
  return *this;
}

StagingBuffers::~StagingBuffers() { release(); }

void StagingBuffers::release() {
  if (memory_ == nullptr || copier_ == nullptr) return;
  copier_->unpin(memory_);
  std::free(memory_);
  memory_ = nullptr;
}

}  // namespace ringsync::cuda
