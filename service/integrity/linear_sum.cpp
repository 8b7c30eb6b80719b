#include "service/integrity/linear_sum.h"

#include <cstring>

namespace ringsync::service::integrity {

namespace {

template <typename Unsigned>
std::uint64_t weighted(const std::byte* data, std::size_t count) {
  Unsigned sum = 0;
  for (std::size_t i = 0; i < count; ++i) {
    Unsigned x;
    std::memcpy(&x, data + i * sizeof(Unsigned), sizeof x);
    sum = static_cast<Unsigned>(sum + static_cast<Unsigned>(2 * i + 1) * x);
  }
  return sum;
}

}  // namespace

bool linear_applies(DType dtype, ReduceOp op) {
  return op == ReduceOp::kSum && (dtype == DType::kI32 || dtype == DType::kI64);
}

std::uint64_t linear_sum(const std::byte* data, std::size_t count, DType dtype) {
  return dtype == DType::kI32 ? weighted<std::uint32_t>(data, count) : weighted<std::uint64_t>(data, count);
}

std::uint64_t linear_add(std::uint64_t a, std::uint64_t b, DType dtype) {
  return dtype == DType::kI32 ? static_cast<std::uint32_t>(a + b) : a + b;
}

}  // namespace ringsync::service::integrity
