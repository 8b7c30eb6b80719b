#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "service/integrity/linear_sum.h"

namespace test_service_integrity_linear_sum {

using namespace ringsync;
using namespace ringsync::service::integrity;

namespace {

template <typename T>
std::uint64_t sum_of(const std::vector<T>& v, DType dtype) {
  return linear_sum(reinterpret_cast<const std::byte*>(v.data()), v.size(), dtype);
}

}  // namespace

TEST_CASE("integrity: the linear sum applies to i32 and i64 sums only") {
  CHECK(linear_applies(DType::kI32, ReduceOp::kSum));
  CHECK(linear_applies(DType::kI64, ReduceOp::kSum));
  CHECK_FALSE(linear_applies(DType::kI32, ReduceOp::kAvg));
  CHECK_FALSE(linear_applies(DType::kI64, ReduceOp::kMax));
  CHECK_FALSE(linear_applies(DType::kF32, ReduceOp::kSum));
  CHECK_FALSE(linear_applies(DType::kU8, ReduceOp::kSum));
}

TEST_CASE("integrity: the linear sum of a wrapping sum is the sum of the linear sums") {
  std::mt19937_64 gen(5);
  for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{100003}}) {
    CAPTURE(count);
    std::vector<std::int32_t> a32(count), b32(count), s32(count);
    std::vector<std::int64_t> a64(count), b64(count), s64(count);
    for (std::size_t i = 0; i < count; ++i) {
      a32[i] = static_cast<std::int32_t>(gen());
      b32[i] = static_cast<std::int32_t>(gen());
      s32[i] = static_cast<std::int32_t>(static_cast<std::uint32_t>(a32[i]) + static_cast<std::uint32_t>(b32[i]));
      a64[i] = static_cast<std::int64_t>(gen());
      b64[i] = static_cast<std::int64_t>(gen());
      s64[i] = static_cast<std::int64_t>(static_cast<std::uint64_t>(a64[i]) + static_cast<std::uint64_t>(b64[i]));
    }
    CHECK(sum_of(s32, DType::kI32) == linear_add(sum_of(a32, DType::kI32), sum_of(b32, DType::kI32), DType::kI32));
    CHECK(sum_of(s32, DType::kI32) <= 0xffffffffull);
    CHECK(sum_of(s64, DType::kI64) == linear_add(sum_of(a64, DType::kI64), sum_of(b64, DType::kI64), DType::kI64));
    if (count < 2) continue;
    // One element off, or two swapped: the sum changes.
    const std::uint64_t right = sum_of(s32, DType::kI32);
    s32[count / 2] ^= 1 << 30;
    CHECK(sum_of(s32, DType::kI32) != right);
    s32[count / 2] ^= 1 << 30;
    if (s32[0] != s32[1]) {
      std::swap(s32[0], s32[1]);
      CHECK(sum_of(s32, DType::kI32) != right);
    }
  }
}

}  // namespace test_service_integrity_linear_sum
