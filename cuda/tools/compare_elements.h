// Element-wise comparison of a device result with reduce_reference's, by the rules of
// common/reduce.h: integers and min/max must match bit for bit; for sum/avg/prod two
// NaNs match whatever their payloads (IEEE leaves those open); other float results
// that differ by one unit in the last place count as rounding, anything more as wrong.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "common/dtype.h"

namespace ringsync::cuda::tools {

struct Comparison {
  std::size_t exact = 0;
  std::size_t nan_payload = 0;  // both NaN, payloads differ (sum/avg/prod only)
  std::size_t one_ulp = 0;      // within float rounding, not bit-exact
  std::size_t wrong = 0;
  std::size_t first_wrong = std::numeric_limits<std::size_t>::max();

  bool ok() const { return wrong == 0; }
  bool bit_exact() const { return nan_payload == 0 && one_ulp == 0 && wrong == 0; }
};

namespace detail {

// Sign-magnitude float bits as an integer that orders like the values.
inline std::int64_t ordered(std::uint64_t bits, int width) {
  const std::uint64_t sign = std::uint64_t{1} << (width - 1);
  const std::uint64_t magnitude = bits & (sign - 1);
  return (bits & sign) ? -static_cast<std::int64_t>(magnitude) : static_cast<std::int64_t>(magnitude);
}

inline bool is_nan(std::uint64_t bits, DType dtype) {
  switch (dtype) {
    case DType::kF32: return (bits & 0x7FFFFFFFu) > 0x7F800000u;
    case DType::kF64: return (bits & 0x7FFFFFFFFFFFFFFFull) > 0x7FF0000000000000ull;
    case DType::kF16: return (bits & 0x7FFFu) > 0x7C00u;
    case DType::kBF16: return (bits & 0x7FFFu) > 0x7F80u;
    default: return false;
  }
}

inline bool is_float(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF64 || dtype == DType::kF16 ||
         dtype == DType::kBF16;
}

}  // namespace detail

inline Comparison compare_elements(const std::vector<std::byte>& got,
                                   const std::vector<std::byte>& want, std::size_t count,
                                   DType dtype, ReduceOp op) {
  Comparison c;
  const std::size_t size = dtype_size(dtype);
  const int width = static_cast<int>(size * 8);
  for (std::size_t i = 0; i < count; ++i) {
    std::uint64_t g = 0, w = 0;
    std::memcpy(&g, got.data() + i * size, size);
    std::memcpy(&w, want.data() + i * size, size);
    if (g == w) {
      ++c.exact;
      continue;
    }
    bool fine = false;
    if (detail::is_float(dtype)) {
      const bool g_nan = detail::is_nan(g, dtype), w_nan = detail::is_nan(w, dtype);
      const bool folds = op == ReduceOp::kSum || op == ReduceOp::kAvg || op == ReduceOp::kProd;
      if (g_nan && w_nan && folds) {
        ++c.nan_payload;
        fine = true;
      } else if (!g_nan && !w_nan) {
        const std::int64_t d = detail::ordered(g, width) - detail::ordered(w, width);
        if (d == 1 || d == -1) {
          ++c.one_ulp;
          fine = true;
        }
      }
    }
    if (!fine) {
      if (c.wrong == 0) c.first_wrong = i;
      ++c.wrong;
    }
  }
  return c;
}

}  // namespace ringsync::cuda::tools
