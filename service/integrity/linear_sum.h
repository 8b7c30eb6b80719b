// A checksum that commutes with integer sums, so a wrong reduction that every
// node received alike is caught too (verdict.h compares copies, which agree
// then). L(x) = sum over i of (2i + 1) * x[i], in the elements' own
// wrap-around arithmetic (mod 2^32 for i32, 2^64 for i64): L(a + b) = L(a) +
// L(b), so the sum of the nodes' inputs' L must be the result's L. The odd
// weights make any change of one element change L, and tie L to positions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/dtype.h"

namespace ringsync::service::integrity {

// i32 and i64 sums: the reductions the ring computes exactly.
bool linear_applies(DType dtype, ReduceOp op);

// L of `count` elements of `dtype` at `data` (widened to 64 bits; for i32 the
// top half is 0).
std::uint64_t linear_sum(const std::byte* data, std::size_t count, DType dtype);

// a + b in `dtype`'s wrap-around arithmetic (what adding two L values means).
std::uint64_t linear_add(std::uint64_t a, std::uint64_t b, DType dtype);

}  // namespace ringsync::service::integrity
