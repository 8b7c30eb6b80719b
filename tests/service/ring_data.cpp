// The inputs and references of test_ring_data.h.
#include <cstring>

#include "common/half.h"
#include "service/test_ring_data.h"

namespace ringsync::service::ring::testing {

void store(std::byte* at, DType dtype, double value) {
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

bool is_float(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF64 || dtype == DType::kF16 ||
         dtype == DType::kBF16;
}

namespace {

// SplitMix64 (Steele, Lea, Flood): a generator of its own here rather than
// std::mt19937, whose template the linker may take from a test file built at -O0.
class Draws {
 public:
  explicit Draws(std::uint64_t seed) : state_(seed) {}
  // A value in [lo, hi] (the modulo bias is immaterial to these tests).
  int in(int lo, int hi) {
    state_ += 0x9e3779b97f4a7c15ull;
    std::uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return lo + static_cast<int>(z % static_cast<std::uint64_t>(hi - lo + 1));
  }

 private:
  std::uint64_t state_;
};

}  // namespace

Bytes ring_input(DType dtype, ReduceOp op, std::size_t count, int rank, std::uint32_t seed) {
  const std::size_t elem = dtype_size(dtype);
  Bytes out(count * elem);
  Draws rng(seed * 7919u + static_cast<std::uint32_t>(rank) * 104729u + static_cast<std::uint32_t>(count) * 31u +
            static_cast<std::uint32_t>(dtype) * 5u + static_cast<std::uint32_t>(op));
  if (!is_float(dtype)) {
    for (std::byte& b : out) b = static_cast<std::byte>(rng.in(0, 255));
    return out;
  }
  static const double kPowers[] = {-2.0, -1.0, -0.5, 0.5, 1.0, 2.0};
  for (std::size_t i = 0; i < count; ++i) {
    double v = 0;
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        v = rng.in(-8, 8) / 8.0;
        break;
      case ReduceOp::kProd:
        v = kPowers[rng.in(0, 5)];
        break;
      case ReduceOp::kMin:
      case ReduceOp::kMax: {
        const int k = rng.in(-1000, 1000);
        v = k == 0 && rank % 2 == 1 ? -0.0 : k / 8.0;
        break;
      }
    }
    store(out.data() + i * elem, dtype, v);
  }
  return out;
}

bool same_bytes(const Bytes& a, const Bytes& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

// reduce_reference over every node's input (avg divides by inputs.size()).
Bytes reference(const std::vector<Bytes>& inputs, std::size_t count, DType dtype, ReduceOp op) {
  Bytes out(count * dtype_size(dtype));
  std::vector<const void*> srcs;
  for (const Bytes& in : inputs) srcs.push_back(in.data());
  if (count != 0) reduce::reduce_reference(out.data(), srcs.data(), srcs.size(), count, dtype, op);
  return out;
}

}  // namespace ringsync::service::ring::testing
