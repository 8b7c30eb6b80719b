#include <doctest/doctest.h>

#include <cstddef>

#include "service/ring/partition.h"

namespace test_service_ring_partition {

using namespace ringsync;
using namespace ringsync::service::ring;

TEST_CASE("ring partition: segments tile the buffer, sizes differ by at most one, larger first") {
  for (int n : {1, 2, 3, 4, 7, 11}) {
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, static_cast<std::size_t>(n - 1),
                              static_cast<std::size_t>(n), std::size_t{37}, std::size_t{100003}}) {
      CAPTURE(n);
      CAPTURE(count);
      const Partition p(count, n, 5);
      CHECK(p.segments() == n);
      std::size_t next = 0;
      for (int s = 0; s < n; ++s) {
        const Range seg = p.segment(s);
        CHECK(seg.begin == next);
        CHECK(seg.count == count / n + (static_cast<std::size_t>(s) < count % n ? 1 : 0));
        next += seg.count;
      }
      CHECK(next == count);
    }
  }
}

TEST_CASE("ring partition: count below the node count leaves the last segments empty") {
  const Partition p(2, 5, 4);
  CHECK(p.segment(0).count == 1);
  CHECK(p.segment(1).count == 1);
  for (int s = 2; s < 5; ++s) {
    CHECK(p.segment(s).count == 0);
    CHECK(p.segment(s).begin == 2);
    CHECK(p.chunks(s) == 0);
  }
}

TEST_CASE("ring partition: chunks tile each segment, only the last is short") {
  const Partition p(103, 4, 6);  // segments of 26, 26, 26, 25 elements
  CHECK(p.chunk_elements() == 6);
  for (int s = 0; s < 4; ++s) {
    CAPTURE(s);
    const Range seg = p.segment(s);
    CHECK(p.chunks(s) == (seg.count + 5) / 6);
    std::size_t next = seg.begin;
    for (std::size_t k = 0; k < p.chunks(s); ++k) {
      const Range c = p.chunk(s, k);
      CHECK(c.begin == next);
      CHECK(c.count >= 1);
      if (k + 1 < p.chunks(s)) CHECK(c.count == 6);
      next += c.count;
    }
    CHECK(next == seg.begin + seg.count);
  }
  CHECK(p.chunk(3, 4).count == 1);  // 25 = 4 * 6 + 1
}

TEST_CASE("ring partition: chunks grow so no segment needs more than 65536 of them") {
  const std::size_t count = 3 * Partition::kMaxChunks * 2 + 5;  // segments of ~2 * 65536 + 2
  const Partition p(count, 3, 1);
  CHECK(p.chunk_elements() == 3);
  for (int s = 0; s < 3; ++s) CHECK(p.chunks(s) <= Partition::kMaxChunks);
  const Partition fits(Partition::kMaxChunks, 1, 1);
  CHECK(fits.chunk_elements() == 1);
  CHECK(fits.chunks(0) == Partition::kMaxChunks);
}

TEST_CASE("ring partition: chunk_elements counts whole elements, at least one") {
  CHECK(chunk_elements(1024, DType::kF32) == 256);
  CHECK(chunk_elements(1023, DType::kF32) == 255);
  CHECK(chunk_elements(3, DType::kF64) == 1);
  CHECK(chunk_elements(7, DType::kU8) == 7);
  CHECK(chunk_elements(0, DType::kBF16) == 1);
}

}  // namespace test_service_ring_partition
