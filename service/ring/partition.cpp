#include "service/ring/partition.h"

#include <algorithm>

namespace ringsync::service::ring {

Partition::Partition(std::size_t count, int segments, std::size_t chunk_elements)
    : count_(count),
      segments_(std::max(segments, 1)),
      chunk_elements_(std::max<std::size_t>(chunk_elements, 1)) {
  // The largest segment has ceil(count / segments) elements; it must fit in
  // kMaxChunks chunks.
  const auto n = static_cast<std::size_t>(segments_);
  const std::size_t largest = count_ / n + (count_ % n != 0 ? 1 : 0);
  const std::size_t smallest_fitting = largest / kMaxChunks + (largest % kMaxChunks != 0 ? 1 : 0);
  chunk_elements_ = std::max(chunk_elements_, smallest_fitting);
}

Range Partition::segment(int s) const {
  const auto n = static_cast<std::size_t>(segments_);
  const auto i = static_cast<std::size_t>(s);
  const std::size_t base = count_ / n;
  const std::size_t extra = count_ % n;  // the first `extra` segments hold one more
  return {i * base + std::min(i, extra), base + (i < extra ? 1 : 0)};
}

std::size_t Partition::chunks(int s) const {
  const std::size_t elements = segment(s).count;
  return elements / chunk_elements_ + (elements % chunk_elements_ != 0 ? 1 : 0);
}

Range Partition::chunk(int s, std::size_t k) const {
  const Range seg = segment(s);
  const std::size_t offset = k * chunk_elements_;
  return {seg.begin + offset, std::min(chunk_elements_, seg.count - offset)};
}

std::size_t chunk_elements(std::size_t chunk_bytes, DType dtype) {
  // An invalid dtype (size 0) counts as bytes; the task's post() rejects it.
  const std::size_t size = std::max<std::size_t>(dtype_size(dtype), 1);
  return std::max<std::size_t>(chunk_bytes / size, 1);
}

}  // namespace ringsync::service::ring
