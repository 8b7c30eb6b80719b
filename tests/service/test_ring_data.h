// Inputs for ring tests whose results do not depend on the order of the
// reduction, so the ring's result can be checked bit for bit against
// reduce_reference over all nodes' inputs (which folds in another order):
// - integers: any values (wrapping sum and product are order-free);
// - float sum/avg: multiples of 1/8 in [-1, 1], so every partial sum of up to
//   a few dozen nodes is exact in every float type (bf16 included);
// - float prod: +-1/2, +-1, +-2, so every partial product is an exact power of
//   two;
// - float min/max: any finite values, with signed zeros.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "common/dtype.h"
#include "common/half.h"
#include "common/reduce.h"

namespace ringsync::service::ring::testing {

using Bytes = std::vector<std::byte>;

inline void store(std::byte* at, DType dtype, double value) {
  switch (dtype) {
    case DType::kF32: {
      const auto v = static_cast<float>(value);
      std::memcpy(at, &v, sizeof v);
      return;
    }
    case DType::kF64:
      std::memcpy(at, &value, sizeof value);
      return;
    case DType::kF16: {
      const std::uint16_t v = f32_to_f16(static_cast<float>(value));
      std::memcpy(at, &v, sizeof v);
      return;
    }
    case DType::kBF16: {
      const std::uint16_t v = f32_to_bf16(static_cast<float>(value));
      std::memcpy(at, &v, sizeof v);
      return;
    }
    default:
      return;
  }
}

inline bool is_float(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF64 || dtype == DType::kF16 ||
         dtype == DType::kBF16;
}

// Node `rank`'s input of `count` elements for an `op` reduction.
inline Bytes ring_input(DType dtype, ReduceOp op, std::size_t count, int rank,
                        std::uint32_t seed = 0) {
  const std::size_t elem = dtype_size(dtype);
  Bytes out(count * elem);
  std::mt19937 rng(seed * 7919u + static_cast<std::uint32_t>(rank) * 104729u +
                   static_cast<std::uint32_t>(count) * 31u +
                   static_cast<std::uint32_t>(dtype) * 5u + static_cast<std::uint32_t>(op));
  if (!is_float(dtype)) {
    std::uniform_int_distribution<int> byte(0, 255);
    for (std::byte& b : out) b = static_cast<std::byte>(byte(rng));
    return out;
  }
  std::uniform_int_distribution<int> eighths(-8, 8);
  std::uniform_int_distribution<int> wide(-1000, 1000);
  std::uniform_int_distribution<int> power(0, 5);
  static const double kPowers[] = {-2.0, -1.0, -0.5, 0.5, 1.0, 2.0};
  for (std::size_t i = 0; i < count; ++i) {
    double v = 0;
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        v = eighths(rng) / 8.0;
        break;
      case ReduceOp::kProd:
        v = kPowers[power(rng)];
        break;
      case ReduceOp::kMin:
      case ReduceOp::kMax: {
        const int k = wide(rng);
        v = k == 0 && rank % 2 == 1 ? -0.0 : k / 8.0;
        break;
      }
    }
    store(out.data() + i * elem, dtype, v);
  }
  return out;
}

// reduce_reference over every node's input (avg divides by inputs.size()).
inline Bytes reference(const std::vector<Bytes>& inputs, std::size_t count, DType dtype,
                       ReduceOp op) {
  Bytes out(count * dtype_size(dtype));
  std::vector<const void*> srcs;
  for (const Bytes& in : inputs) srcs.push_back(in.data());
  if (count != 0) reduce::reduce_reference(out.data(), srcs.data(), srcs.size(), count, dtype, op);
  return out;
}

}  // namespace ringsync::service::ring::testing
