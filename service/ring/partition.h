// How a buffer of `count` elements is cut for a ring of N nodes.
//
// - N contiguous segments whose sizes differ by at most one element: with
//   count = q*N + r, the first r segments hold q+1 elements and the rest q.
//   With count < N the last N-count segments are empty (they carry no
//   messages); with count = 0 all are.
// - Each segment is cut into chunks, the unit one message carries: every
//   chunk holds chunk_elements() elements except a segment's last, which holds
//   the rest. chunk_elements() is the requested size, raised where a segment
//   would otherwise need more than kMaxChunks chunks (a chunk index is 16 bits
//   of a tag).
//
// Every node computes the same partition from the same arguments, so the two
// ends of a link agree on every message's size and tag.
#pragma once

#include <cstddef>

#include "common/dtype.h"

namespace ringsync::service::ring {

// Elements [begin, begin + count) of the buffer.
struct Range {
  std::size_t begin = 0;
  std::size_t count = 0;
};

class Partition {
 public:
  static constexpr std::size_t kMaxChunks = 65536;

  // segments and chunk_elements below 1 are taken as 1.
  Partition(std::size_t count, int segments, std::size_t chunk_elements);

  std::size_t count() const { return count_; }
  int segments() const { return segments_; }
  std::size_t chunk_elements() const { return chunk_elements_; }

  // Segment s, 0 <= s < segments().
  Range segment(int s) const;
  // Number of chunks in segment s: 0 for an empty segment.
  std::size_t chunks(int s) const;
  // Chunk k of segment s, 0 <= k < chunks(s), in elements of the whole buffer.
  Range chunk(int s, std::size_t k) const;

 private:
  std::size_t count_;
  int segments_;
  std::size_t chunk_elements_;
};

// i modulo n in [0, n): segment and node numbers when walking the ring
// backwards (segment r-s-1 at step s).
inline int ring_index(int i, int n) { return ((i % n) + n) % n; }

// Whole elements of `dtype` in a chunk of at most `chunk_bytes`, at least one.
std::size_t chunk_elements(std::size_t chunk_bytes, DType dtype);

}  // namespace ringsync::service::ring
