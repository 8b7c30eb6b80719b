#include "common/reduce.h"

#include <doctest/doctest.h>

#include <bit>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/half.h"
#include "common/reduce_kernels.h"

namespace ringsync::reduce {
namespace {

constexpr DType kDTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16,
                             DType::kI32, DType::kI64, DType::kU8};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMin, ReduceOp::kMax,
                             ReduceOp::kProd};
constexpr std::size_t kNsrcs[] = {1, 2, 3, 4, 7};
constexpr std::size_t kCounts[] = {0, 1, 2, 3, 7, 15, 16, 17, 31, 33, 1000, 4099};
constexpr std::size_t npos = static_cast<std::size_t>(-1);

std::string describe(const KernelSet& kernels, DType dtype, ReduceOp op, std::size_t nsrc,
                     std::size_t count) {
  return std::string(kernels.isa) + " " + std::string(dtype_name(dtype)) + " " +
         std::string(reduce_op_name(op)) + " nsrc=" + std::to_string(nsrc) +
         " count=" + std::to_string(count);
}

bool is_nan(DType dtype, const unsigned char* p) {
  std::uint16_t h = 0;
  switch (dtype) {
    case DType::kF32: { float f; std::memcpy(&f, p, 4); return std::isnan(f); }
    case DType::kF64: { double d; std::memcpy(&d, p, 8); return std::isnan(d); }
    case DType::kF16: std::memcpy(&h, p, 2); return std::isnan(f16_to_f32(h));
    case DType::kBF16: std::memcpy(&h, p, 2); return std::isnan(bf16_to_f32(h));
    default: return false;
  }
}

// Index of the first element that differs, or npos. Equal means the same bits; only
// sum/avg/prod may differ in NaN payload when NaNs meet (reduce.h), so there two NaNs match.
std::size_t first_difference(DType dtype, ReduceOp op, const void* a, const void* b,
                             std::size_t count) {
  const std::size_t size = dtype_size(dtype);
  const bool nan_payload_free = op == ReduceOp::kSum || op == ReduceOp::kAvg || op == ReduceOp::kProd;
  const auto* pa = static_cast<const unsigned char*>(a);
  const auto* pb = static_cast<const unsigned char*>(b);
  if (count == 0 || std::memcmp(pa, pb, count * size) == 0) return npos;
  for (std::size_t i = 0; i < count; ++i) {
    const unsigned char* x = pa + i * size;
    const unsigned char* y = pb + i * size;
    if (std::memcmp(x, y, size) == 0) continue;
    if (nan_payload_free && is_nan(dtype, x) && is_nan(dtype, y)) continue;
    return i;
  }
  return npos;
}

// splitmix64: fast, seeded, good enough to scatter test values.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t operator()() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
  }
  double uniform(double lo, double hi) {  // 53 random bits scaled into [lo, hi)
    return lo + (hi - lo) * static_cast<double>((*this)() >> 11) * 0x1p-53;
  }

 private:
  std::uint64_t state_;
};

// Random elements: floats are mostly ordinary values with 1 in 16 a special value
// (NaNs with payloads, a signalling NaN, infinities, signed zeros, subnormals, extremes);
// integers are uniformly random bits, so sums and products wrap.
void fill_random(DType dtype, void* data, std::size_t count, Rng& rng) {
  auto value = [&rng] { return rng.uniform(-100.0, 100.0); };
  auto special = [&rng] { return rng() % 16 == 0; };
  auto* out = static_cast<unsigned char*>(data);
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint64_t r = rng();
    switch (dtype) {
      case DType::kF32: {
        const std::uint32_t specials[] = {0x7FC12345u, 0xFFC00000u, 0x7F800001u, 0x7F800000u,
                                          0xFF800000u, 0x80000000u, 0x00000000u, 0x00000001u,
                                          0x807FFFFFu, 0x7F7FFFFFu};
        const std::uint32_t bits = special() ? specials[r % 10]
                                             : std::bit_cast<std::uint32_t>(static_cast<float>(value()));
        std::memcpy(out + 4 * i, &bits, 4);
        break;
      }
      case DType::kF64: {
        const std::uint64_t specials[] = {0x7FF8000000012345u, 0xFFF8000000000000u,
                                          0x7FF0000000000001u, 0x7FF0000000000000u,
                                          0xFFF0000000000000u, 0x8000000000000000u,
                                          0x0000000000000001u, 0x7FEFFFFFFFFFFFFFu};
        const std::uint64_t bits = special() ? specials[r % 8] : std::bit_cast<std::uint64_t>(value());
        std::memcpy(out + 8 * i, &bits, 8);
        break;
      }
      case DType::kF16:
      case DType::kBF16: {
        const std::uint16_t specials[] = {0x7E01, 0xFE00, 0x7C01, 0x7FC1, 0xFF81, 0x7C00,
                                          0xFC00, 0x8000, 0x0000, 0x0001, 0x7BFF, 0x7F7F};
        const auto v = static_cast<float>(value() / 12.0);  // products of 7 stay mostly finite
        const std::uint16_t bits = special() ? specials[r % 12]
                                   : dtype == DType::kF16 ? f32_to_f16(v) : f32_to_bf16(v);
        std::memcpy(out + 2 * i, &bits, 2);
        break;
      }
      case DType::kI32: { const auto v = static_cast<std::uint32_t>(r); std::memcpy(out + 4 * i, &v, 4); break; }
      case DType::kI64: std::memcpy(out + 8 * i, &r, 8); break;
      case DType::kU8: out[i] = static_cast<unsigned char>(r); break;
    }
  }
}

constexpr unsigned char kGuard = 0xA5;
constexpr std::size_t kSlack = 64;  // guard bytes on each side of every output

// Inputs at varied (element-aligned but not vector-aligned) offsets, like real buffers.
struct Inputs {
  std::vector<std::vector<unsigned char>> storage;
  std::vector<const void*> ptrs;
  Inputs(DType dtype, std::size_t nsrc, std::size_t count, Rng& rng) {
    const std::size_t size = dtype_size(dtype);
    for (std::size_t k = 0; k < nsrc; ++k) {
      storage.emplace_back(count * size + kSlack);
      unsigned char* p = storage.back().data() + (k % 3) * size;
      fill_random(dtype, p, count, rng);
      ptrs.push_back(p);
    }
  }
};

// An output buffer with guard bytes around it, to catch writes outside [0, count).
struct Output {
  std::vector<unsigned char> storage;
  unsigned char* data;
  std::size_t bytes;
  Output(std::size_t bytes_in, std::size_t lead) : storage(bytes_in + 2 * kSlack, kGuard), data(storage.data() + lead), bytes(bytes_in) {}
  bool guards_intact() const {
    const unsigned char* end = storage.data() + storage.size();
    for (const unsigned char* p = storage.data(); p < data; ++p) {
      if (*p != kGuard) return false;
    }
    for (const unsigned char* p = data + bytes; p < end; ++p) {
      if (*p != kGuard) return false;
    }
    return true;
  }
};

TEST_CASE("every kernel matches reduce_reference for every dtype, op, nsrc and count") {
  Rng rng(20240601);
  for (const KernelSet& kernels : available_kernels()) {
    for (const DType dtype : kDTypes) {
      const std::size_t size = dtype_size(dtype);
      for (const ReduceOp op : kOps) {
        for (const std::size_t nsrc : kNsrcs) {
          for (const std::size_t count : kCounts) {
            Inputs in(dtype, nsrc, count, rng);
            Output expected(count * size, kSlack);
            reduce_reference(expected.data, in.ptrs.data(), nsrc, count, dtype, op);
            Output actual(count * size, kSlack + (count % 5) * size);
            kernels.reduce(actual.data, in.ptrs.data(), nsrc, count, dtype, op);
            INFO(describe(kernels, dtype, op, nsrc, count));
            REQUIRE(first_difference(dtype, op, expected.data, actual.data, count) == npos);
            REQUIRE(actual.guards_intact());

            // In place, with dst being the first and then the last input.
            for (const std::size_t k : {std::size_t{0}, nsrc - 1}) {
              std::vector<unsigned char> target(in.storage[k]);
              std::vector<const void*> ptrs = in.ptrs;
              void* dst = target.data() + (k % 3) * size;
              ptrs[k] = dst;
              kernels.reduce(dst, ptrs.data(), nsrc, count, dtype, op);
              INFO("in place as input " << k);
              REQUIRE(first_difference(dtype, op, expected.data, dst, count) == npos);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("reduce() and divide() use the first available kernel set") {
  const auto kernels = available_kernels();
  REQUIRE(!kernels.empty());
  CHECK(std::string(kernel_isa()) == kernels.front().isa);
  CHECK(std::string(kernels.back().isa) == "default");
  for (const KernelSet& k : kernels) {
    const std::string isa = k.isa;
    CHECK((isa == "avx512f" || isa == "avx2" || isa == "default"));
  }
  const float a[3] = {1.0f, -2.0f, 0.5f};
  const float b[3] = {2.0f, 4.0f, 0.25f};
  const void* srcs[2] = {a, b};
  float dst[3];
  reduce(dst, srcs, 2, 3, DType::kF32, ReduceOp::kSum);
  CHECK(dst[0] == 3.0f);
  CHECK(dst[1] == 2.0f);
  CHECK(dst[2] == 0.75f);
  divide(dst, 3, DType::kF32, 2);
  CHECK(dst[0] == 1.5f);
  CHECK(dst[1] == 1.0f);
  CHECK(dst[2] == 0.375f);
}

// Smallest element count whose reduction takes the streaming-store path, or 0 if that
// needs more than max_count elements.
std::size_t streaming_count(DType dtype, std::size_t nsrc, std::size_t max_count) {
  for (std::size_t count = 1024; count <= max_count; count *= 2) {
    if (detail::prefer_streaming_stores(count * dtype_size(dtype), nsrc)) return count + 37;
  }
  return 0;
}

TEST_CASE("large reductions (streaming stores) match the reference, aligned or not") {
  Rng rng(7);
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    const std::size_t count = streaming_count(dtype, 3, std::size_t{1} << 26);
    if (count == 0) {
      MESSAGE("last-level cache too large to exercise streaming stores in this test");
      return;
    }
    const std::size_t size = dtype_size(dtype);
    Inputs in(dtype, 3, count, rng);
    Output expected(count * size, kSlack);
    reduce_reference(expected.data, in.ptrs.data(), 3, count, dtype, ReduceOp::kMax);
    for (const KernelSet& kernels : available_kernels()) {
      // Leads: vector-aligned, element-aligned only (scalar head), and byte-misaligned
      // (no streaming possible).
      for (const std::size_t lead : {kSlack, kSlack + size, kSlack + 1}) {
        Output actual(count * size, lead);
        kernels.reduce(actual.data, in.ptrs.data(), 3, count, dtype, ReduceOp::kMax);
        INFO(describe(kernels, dtype, ReduceOp::kMax, 3, count) << " lead " << lead);
        REQUIRE(first_difference(dtype, ReduceOp::kMax, expected.data, actual.data, count) == npos);
        REQUIRE(actual.guards_intact());
      }
    }
  }
}

// Reduces inputs that are constant across a buffer long enough to pass through every
// kernel's unrolled body, single-vector loop and scalar tail, and checks every element.
template <class T>
void check_constant_reduce(DType dtype, ReduceOp op, std::vector<T> inputs, T expected) {
  constexpr std::size_t kCount = 300;
  std::vector<std::vector<T>> buffers;
  std::vector<const void*> ptrs;
  for (const T v : inputs) {
    buffers.emplace_back(kCount, v);
    ptrs.push_back(buffers.back().data());
  }
  std::vector<T> reference(kCount);
  reduce_reference(reference.data(), ptrs.data(), ptrs.size(), kCount, dtype, op);
  INFO(dtype_name(dtype) << " " << reduce_op_name(op));
  REQUIRE(first_difference(dtype, op, reference.data(), std::vector<T>(kCount, expected).data(), kCount) == npos);
  for (const KernelSet& kernels : available_kernels()) {
    std::vector<T> out(kCount);
    kernels.reduce(out.data(), ptrs.data(), ptrs.size(), kCount, dtype, op);
    INFO(kernels.isa);
    CHECK(first_difference(dtype, op, reference.data(), out.data(), kCount) == npos);
  }
}

float f32(std::uint32_t bits) { return std::bit_cast<float>(bits); }
double f64(std::uint64_t bits) { return std::bit_cast<double>(bits); }

TEST_CASE("float special values: signed zeros, NaN propagation, infinities, subnormals") {
  using R = ReduceOp;
  const DType F = DType::kF32;
  const float nan_a = f32(0x7FC12345u), nan_b = f32(0xFFC00001u);
  check_constant_reduce<float>(F, R::kMin, {-0.0f, 0.0f}, -0.0f);
  check_constant_reduce<float>(F, R::kMin, {0.0f, -0.0f}, -0.0f);
  check_constant_reduce<float>(F, R::kMax, {-0.0f, 0.0f}, 0.0f);
  check_constant_reduce<float>(F, R::kMax, {0.0f, -0.0f}, 0.0f);
  check_constant_reduce<float>(F, R::kMin, {nan_a, 1.0f}, nan_a);  // payload kept
  check_constant_reduce<float>(F, R::kMin, {1.0f, nan_a}, nan_a);
  check_constant_reduce<float>(F, R::kMax, {1.0f, nan_b, nan_a}, nan_b);  // first NaN wins
  check_constant_reduce<float>(F, R::kMax, {-INFINITY, nan_b}, nan_b);
  check_constant_reduce<float>(F, R::kMin, {f32(0x7F800001u)}, f32(0x7F800001u));  // nsrc=1: bits as they are
  check_constant_reduce<float>(F, R::kSum, {INFINITY, -INFINITY}, NAN);
  check_constant_reduce<float>(F, R::kSum, {INFINITY, 1.0f}, INFINITY);
  check_constant_reduce<float>(F, R::kSum, {3e38f, 3e38f}, INFINITY);
  check_constant_reduce<float>(F, R::kSum, {f32(1), f32(1)}, f32(2));  // subnormals, no flush
  check_constant_reduce<float>(F, R::kSum, {-0.0f, -0.0f}, -0.0f);
  check_constant_reduce<float>(F, R::kProd, {-0.0f, 5.0f}, -0.0f);
  check_constant_reduce<float>(F, R::kAvg, {1.0f, 2.0f}, 1.5f);
  check_constant_reduce<float>(F, R::kAvg, {3e38f, 3e38f}, INFINITY);  // f32 sum overflows first
  const DType D = DType::kF64;
  check_constant_reduce<double>(D, R::kMin, {0.0, -0.0}, -0.0);
  check_constant_reduce<double>(D, R::kMax, {-0.0, 0.0}, 0.0);
  check_constant_reduce<double>(D, R::kMin, {2.0, f64(0x7FF8000000000BADu)}, f64(0x7FF8000000000BADu));
  check_constant_reduce<double>(D, R::kSum, {f64(1), f64(1)}, f64(2));
  check_constant_reduce<double>(D, R::kAvg, {1.0, 2.0, 4.0}, 7.0 / 3.0);
}

TEST_CASE("f16 and bf16 accumulate in f32 and round once, to nearest even") {
  using R = ReduceOp;
  const DType H = DType::kF16;
  check_constant_reduce<std::uint16_t>(H, R::kSum, {0x3C00, 0x1000}, 0x3C00);          // 1 + 2^-11: tie -> even 1
  check_constant_reduce<std::uint16_t>(H, R::kSum, {0x3C00, 0x1000, 0x1000}, 0x3C01);  // one rounding
  check_constant_reduce<std::uint16_t>(H, R::kSum, {0x3C01, 0x1000}, 0x3C02);          // tie above odd: up
  check_constant_reduce<std::uint16_t>(H, R::kSum, {0x7BFF, 0x7BFF}, 0x7C00);          // overflow -> inf
  check_constant_reduce<std::uint16_t>(H, R::kAvg, {0x7BFF, 0x7BFF}, 0x7BFF);          // f32 sum, no overflow
  check_constant_reduce<std::uint16_t>(H, R::kAvg, {0x3C01, 0x3C00}, 0x3C00);          // 1 + 2^-11: even
  check_constant_reduce<std::uint16_t>(H, R::kSum, {0x0001, 0x0001}, 0x0002);          // subnormals
  check_constant_reduce<std::uint16_t>(H, R::kMin, {0x0000, 0x8000}, 0x8000);
  check_constant_reduce<std::uint16_t>(H, R::kMax, {0x8000, 0x0000}, 0x0000);
  check_constant_reduce<std::uint16_t>(H, R::kMin, {0x3C00, 0x7C01}, 0x7E01);          // NaN, quieted
  check_constant_reduce<std::uint16_t>(H, R::kMax, {0xFE05, 0x7E01}, 0xFE05);
  check_constant_reduce<std::uint16_t>(H, R::kMin, {0x7C01}, 0x7E01);                  // nsrc=1 still converts
  check_constant_reduce<std::uint16_t>(H, R::kProd, {0x5C00, 0x5C00}, 0x7C00);         // 256^2 -> inf
  const DType B = DType::kBF16;
  check_constant_reduce<std::uint16_t>(B, R::kSum, {0x3F80, 0x3B80}, 0x3F80);          // 1 + 2^-8: tie -> even
  check_constant_reduce<std::uint16_t>(B, R::kSum, {0x3F80, 0x3B80, 0x3B80}, 0x3F81);  // one rounding
  check_constant_reduce<std::uint16_t>(B, R::kSum, {0x3F81, 0x3B80}, 0x3F82);          // tie above odd: up
  check_constant_reduce<std::uint16_t>(B, R::kSum, {0x7F7F, 0x7F7F}, 0x7F80);
  check_constant_reduce<std::uint16_t>(B, R::kAvg, {0x7F7F, 0x7F7F}, 0x7F80);  // f32 has bf16's range: the sum overflows
  check_constant_reduce<std::uint16_t>(B, R::kMin, {0x0000, 0x8000}, 0x8000);
  check_constant_reduce<std::uint16_t>(B, R::kMin, {0x3F80, 0x7F81}, 0x7FC1);          // NaN, quieted
  check_constant_reduce<std::uint16_t>(B, R::kSum, {0x0001, 0x0001}, 0x0002);          // subnormals
}

TEST_CASE("integer sum and prod wrap; avg truncates the wrapped sum") {
  using R = ReduceOp;
  const DType I = DType::kI32;
  check_constant_reduce<std::int32_t>(I, R::kSum, {INT32_MAX, 1}, INT32_MIN);
  check_constant_reduce<std::int32_t>(I, R::kProd, {65536, 65536}, 0);
  check_constant_reduce<std::int32_t>(I, R::kProd, {-1, INT32_MIN}, INT32_MIN);
  check_constant_reduce<std::int32_t>(I, R::kAvg, {INT32_MAX, INT32_MAX}, -1);  // wrapped -2 / 2
  check_constant_reduce<std::int32_t>(I, R::kAvg, {-3, -4}, -3);
  check_constant_reduce<std::int32_t>(I, R::kAvg, {3, 4}, 3);
  check_constant_reduce<std::int32_t>(I, R::kMin, {INT32_MAX, INT32_MIN, 0}, INT32_MIN);
  check_constant_reduce<std::int32_t>(I, R::kMax, {INT32_MIN, -1}, -1);
  const DType L = DType::kI64;
  check_constant_reduce<std::int64_t>(L, R::kSum, {INT64_MAX, 1}, INT64_MIN);
  check_constant_reduce<std::int64_t>(L, R::kProd, {std::int64_t{1} << 32, std::int64_t{1} << 32}, 0);
  check_constant_reduce<std::int64_t>(L, R::kProd, {3, 0x5555555555555556}, 2);
  check_constant_reduce<std::int64_t>(L, R::kAvg, {-7, 0}, -3);
  check_constant_reduce<std::int64_t>(L, R::kMin, {-1, INT64_MIN}, INT64_MIN);
  check_constant_reduce<std::int64_t>(L, R::kMax, {INT64_MIN, INT64_MAX}, INT64_MAX);
  const DType U = DType::kU8;
  check_constant_reduce<std::uint8_t>(U, R::kSum, {200, 100}, 44);
  check_constant_reduce<std::uint8_t>(U, R::kProd, {16, 16}, 0);
  check_constant_reduce<std::uint8_t>(U, R::kProd, {3, 171}, 1);
  check_constant_reduce<std::uint8_t>(U, R::kProd, {15, 17}, 255);
  check_constant_reduce<std::uint8_t>(U, R::kAvg, {200, 100}, 22);
  check_constant_reduce<std::uint8_t>(U, R::kAvg, {255, 255, 255}, 84);  // 765 mod 256 = 253
  check_constant_reduce<std::uint8_t>(U, R::kMin, {7, 0, 255}, 0);
  check_constant_reduce<std::uint8_t>(U, R::kMax, {7, 255, 0}, 255);
}

// divide() on a constant buffer, every kernel and the reference, against a hand value.
template <class T>
void check_constant_divide(DType dtype, T value, std::size_t divisor, T expected) {
  constexpr std::size_t kCount = 300;
  INFO(dtype_name(dtype) << " divisor " << divisor);
  std::vector<T> data(kCount, value);
  divide_reference(data.data(), kCount, dtype, divisor);
  const std::vector<T> want(kCount, expected);
  REQUIRE(first_difference(dtype, ReduceOp::kMin, want.data(), data.data(), kCount) == npos);
  for (const KernelSet& kernels : available_kernels()) {
    std::vector<T> out(kCount, value);
    kernels.divide(out.data(), kCount, dtype, divisor);
    INFO(kernels.isa);
    CHECK(first_difference(dtype, ReduceOp::kMin, want.data(), out.data(), kCount) == npos);
  }
}

TEST_CASE("divide: truncation toward zero, extreme divisors, float rounding") {
  const std::size_t two31 = std::size_t{1} << 31, two40 = std::size_t{1} << 40;
  check_constant_divide<std::int32_t>(DType::kI32, INT32_MIN, 1, INT32_MIN);
  check_constant_divide<std::int32_t>(DType::kI32, INT32_MIN, 2, -1073741824);
  check_constant_divide<std::int32_t>(DType::kI32, -7, 2, -3);
  check_constant_divide<std::int32_t>(DType::kI32, 7, 2, 3);
  check_constant_divide<std::int32_t>(DType::kI32, INT32_MIN, two31, -1);
  check_constant_divide<std::int32_t>(DType::kI32, INT32_MAX, two31, 0);
  check_constant_divide<std::int32_t>(DType::kI32, -5, two40, 0);
  check_constant_divide<std::int64_t>(DType::kI64, INT64_MIN, std::size_t{1} << 63, -1);
  check_constant_divide<std::int64_t>(DType::kI64, INT64_MIN, 3, -3074457345618258602);
  check_constant_divide<std::int64_t>(DType::kI64, -7, 2, -3);
  check_constant_divide<std::uint8_t>(DType::kU8, 255, 2, 127);
  check_constant_divide<std::uint8_t>(DType::kU8, 255, 256, 0);
  check_constant_divide<float>(DType::kF32, 1.0f, 3, f32(0x3EAAAAABu));
  check_constant_divide<float>(DType::kF32, -0.0f, 2, -0.0f);
  check_constant_divide<float>(DType::kF32, INFINITY, 2, INFINITY);
  check_constant_divide<double>(DType::kF64, 1.0, 3, f64(0x3FD5555555555555u));
  check_constant_divide<std::uint16_t>(DType::kF16, 0x3C00, 3, 0x3555);
  check_constant_divide<std::uint16_t>(DType::kF16, 0x3C01, 2, 0x3801);
  check_constant_divide<std::uint16_t>(DType::kBF16, 0x3F80, 3, 0x3EAB);
}

TEST_CASE("divide matches divide_reference on random data") {
  Rng rng(99);
  const std::size_t divisors[] = {1, 2, 3, 7, 255, 256, 1000, std::size_t{1} << 31,
                                  (std::size_t{1} << 32) + 1, std::size_t{1} << 40};
  for (const KernelSet& kernels : available_kernels()) {
    for (const DType dtype : kDTypes) {
      for (const std::size_t divisor : divisors) {
        for (const std::size_t count : kCounts) {
          std::vector<unsigned char> expected(count * dtype_size(dtype) + 1);
          fill_random(dtype, expected.data() + 1, count, rng);  // odd address on purpose
          std::vector<unsigned char> actual(expected);
          divide_reference(expected.data() + 1, count, dtype, divisor);
          kernels.divide(actual.data() + 1, count, dtype, divisor);
          INFO(describe(kernels, dtype, ReduceOp::kAvg, 1, count) << " divisor " << divisor);
          REQUIRE(first_difference(dtype, ReduceOp::kAvg, expected.data() + 1, actual.data() + 1, count) == npos);
        }
      }
    }
  }
}

}  // namespace
}  // namespace ringsync::reduce
