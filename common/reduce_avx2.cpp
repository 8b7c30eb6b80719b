// AVX2 + F16C reduction kernels. Only called after the dispatcher has checked the CPU
// (reduce.cpp); everything after the target pragma is private to this file.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "common/dtype.h"
#include "common/reduce_kernels.h"

#pragma GCC push_options
#pragma GCC target("avx2,f16c")

#include "common/reduce_simd_loop.h"

namespace ringsync::reduce::detail {
namespace {

constexpr int kRoundNearestEven = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

// ---- f32 lanes, shared by f32, f16 and bf16 ----
struct F32Ops {
  using Acc = __m256;
  using Divisor = __m256;
  static Divisor divisor(std::size_t n) { return _mm256_set1_ps(static_cast<float>(n)); }
  static Acc add(Acc a, Acc b) { return _mm256_add_ps(a, b); }
  static Acc multiply(Acc a, Acc b) { return _mm256_mul_ps(a, b); }
  static Acc divide(Acc a, Divisor n) { return _mm256_div_ps(a, n); }
  // vminps returns its second operand when either is NaN or both are zero; fix up equal
  // lanes (OR gives -0 for a +-0 pair) and lanes where the accumulator is NaN.
  static Acc minimum(Acc a, Acc b) {
    const Acc m = _mm256_min_ps(a, b);
    const Acc fixed = _mm256_blendv_ps(m, _mm256_or_ps(a, b), _mm256_cmp_ps(a, b, _CMP_EQ_OQ));
    return _mm256_blendv_ps(fixed, a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
  }
  static Acc maximum(Acc a, Acc b) {
    const Acc m = _mm256_max_ps(a, b);
    const Acc fixed = _mm256_blendv_ps(m, _mm256_and_ps(a, b), _mm256_cmp_ps(a, b, _CMP_EQ_OQ));
    return _mm256_blendv_ps(fixed, a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
  }
};

struct F32 : F32Ops {
  static constexpr std::size_t kLanes = 8;
  static constexpr std::size_t kElementSize = 4;
  static Acc load(const unsigned char* p) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); }
  static void store(unsigned char* p, Acc a) { _mm256_storeu_ps(reinterpret_cast<float*>(p), a); }
  static void stream(unsigned char* p, Acc a) { _mm256_stream_ps(reinterpret_cast<float*>(p), a); }
};

struct F16 : F32Ops {
  static constexpr std::size_t kLanes = 8;
  static constexpr std::size_t kElementSize = 2;
  static Acc load(const unsigned char* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static __m128i narrow(Acc a) { return _mm256_cvtps_ph(a, kRoundNearestEven); }
  static void store(unsigned char* p, Acc a) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), narrow(a)); }
  static void stream(unsigned char* p, Acc a) { _mm_stream_si128(reinterpret_cast<__m128i*>(p), narrow(a)); }
};

struct BF16 : F32Ops {
  static constexpr std::size_t kLanes = 8;
  static constexpr std::size_t kElementSize = 2;
  static Acc load(const unsigned char* p) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  // Round to nearest even by adding 0x7FFF plus the lowest kept bit; NaNs are quieted.
  static __m128i narrow(Acc a) {
    const __m256i bits = _mm256_castps_si256(a);
    const __m256i high = _mm256_srli_epi32(bits, 16);
    const __m256i bias = _mm256_add_epi32(_mm256_set1_epi32(0x7FFF),
                                          _mm256_and_si256(high, _mm256_set1_epi32(1)));
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(bits, bias), 16);
    const __m256i quiet_nan = _mm256_or_si256(high, _mm256_set1_epi32(0x0040));
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(a, a, _CMP_UNORD_Q));
    const __m256i halves = _mm256_blendv_epi8(rounded, quiet_nan, nan);  // each <= 0xFFFF
    // packus works per 128-bit half: [h0..h3 h0..h3 | h4..h7 h4..h7]; gather 64-bit
    // quarters 0 and 2 into the low half.
    const __m256i packed = _mm256_packus_epi32(halves, halves);
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, _MM_SHUFFLE(3, 1, 2, 0)));
  }
  static void store(unsigned char* p, Acc a) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), narrow(a)); }
  static void stream(unsigned char* p, Acc a) { _mm_stream_si128(reinterpret_cast<__m128i*>(p), narrow(a)); }
};

struct F64 {
  using Acc = __m256d;
  using Divisor = __m256d;
  static constexpr std::size_t kLanes = 4;
  static constexpr std::size_t kElementSize = 8;
  static Divisor divisor(std::size_t n) { return _mm256_set1_pd(static_cast<double>(n)); }
  static Acc load(const unsigned char* p) { return _mm256_loadu_pd(reinterpret_cast<const double*>(p)); }
  static void store(unsigned char* p, Acc a) { _mm256_storeu_pd(reinterpret_cast<double*>(p), a); }
  static void stream(unsigned char* p, Acc a) { _mm256_stream_pd(reinterpret_cast<double*>(p), a); }
  static Acc add(Acc a, Acc b) { return _mm256_add_pd(a, b); }
  static Acc multiply(Acc a, Acc b) { return _mm256_mul_pd(a, b); }
  static Acc divide(Acc a, Divisor n) { return _mm256_div_pd(a, n); }
  static Acc minimum(Acc a, Acc b) {
    const Acc m = _mm256_min_pd(a, b);
    const Acc fixed = _mm256_blendv_pd(m, _mm256_or_pd(a, b), _mm256_cmp_pd(a, b, _CMP_EQ_OQ));
    return _mm256_blendv_pd(fixed, a, _mm256_cmp_pd(a, a, _CMP_UNORD_Q));
  }
  static Acc maximum(Acc a, Acc b) {
    const Acc m = _mm256_max_pd(a, b);
    const Acc fixed = _mm256_blendv_pd(m, _mm256_and_pd(a, b), _mm256_cmp_pd(a, b, _CMP_EQ_OQ));
    return _mm256_blendv_pd(fixed, a, _mm256_cmp_pd(a, a, _CMP_UNORD_Q));
  }
};

// ---- integers: one 256-bit register, wrapping arithmetic ----
struct IntLoadStore {
  using Acc = __m256i;
  static Acc load(const unsigned char* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static void store(unsigned char* p, Acc a) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), a); }
  static void stream(unsigned char* p, Acc a) { _mm256_stream_si256(reinterpret_cast<__m256i*>(p), a); }
};

// Integer avg without a vector integer divide: the reference's scalar division per lane.
template <DType kType, std::size_t kLanes>
__m256i divide_lanes(__m256i a, std::size_t n) {
  alignas(32) unsigned char lanes[32];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), a);
  divide_reference_range(lanes, 0, kLanes, kType, n);
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(lanes));
}

struct I32 : IntLoadStore {
  using Divisor = __m256d;
  static constexpr std::size_t kLanes = 8;
  static constexpr std::size_t kElementSize = 4;
  static Divisor divisor(std::size_t n) { return _mm256_set1_pd(static_cast<double>(n)); }
  static Acc add(Acc a, Acc b) { return _mm256_add_epi32(a, b); }
  static Acc multiply(Acc a, Acc b) { return _mm256_mullo_epi32(a, b); }
  static Acc minimum(Acc a, Acc b) { return _mm256_min_epi32(a, b); }
  static Acc maximum(Acc a, Acc b) { return _mm256_max_epi32(a, b); }
  // |a| <= 2^31: the f64 quotient truncated toward zero is the exact integer quotient
  // (a non-integral quotient is at least 1/n from an integer, more than its rounding error).
  static Acc divide(Acc a, Divisor n) {
    const __m256d low = _mm256_cvtepi32_pd(_mm256_castsi256_si128(a));
    const __m256d high = _mm256_cvtepi32_pd(_mm256_extracti128_si256(a, 1));
    const __m128i q_low = _mm256_cvttpd_epi32(_mm256_div_pd(low, n));
    const __m128i q_high = _mm256_cvttpd_epi32(_mm256_div_pd(high, n));
    return _mm256_inserti128_si256(_mm256_castsi128_si256(q_low), q_high, 1);
  }
};

struct I64 : IntLoadStore {
  using Divisor = std::size_t;
  static constexpr std::size_t kLanes = 4;
  static constexpr std::size_t kElementSize = 8;
  static Divisor divisor(std::size_t n) { return n; }
  static Acc add(Acc a, Acc b) { return _mm256_add_epi64(a, b); }
  // 64-bit product mod 2^64 from 32-bit halves: lo*lo + ((lo*hi + hi*lo) << 32).
  static Acc multiply(Acc a, Acc b) {
    const __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(a, _mm256_srli_epi64(b, 32)),
                                           _mm256_mul_epu32(_mm256_srli_epi64(a, 32), b));
    return _mm256_add_epi64(_mm256_mul_epu32(a, b), _mm256_slli_epi64(cross, 32));
  }
  static Acc minimum(Acc a, Acc b) { return _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(a, b)); }
  static Acc maximum(Acc a, Acc b) { return _mm256_blendv_epi8(b, a, _mm256_cmpgt_epi64(a, b)); }
  static Acc divide(Acc a, Divisor n) { return divide_lanes<DType::kI64, kLanes>(a, n); }
};

struct U8 : IntLoadStore {
  using Divisor = std::size_t;
  static constexpr std::size_t kLanes = 32;
  static constexpr std::size_t kElementSize = 1;
  static Divisor divisor(std::size_t n) { return n; }
  static Acc add(Acc a, Acc b) { return _mm256_add_epi8(a, b); }
  // No byte multiply: the low byte of a 16-bit product is the byte product, so multiply
  // the even bytes in place and the odd bytes shifted down, and merge.
  static Acc multiply(Acc a, Acc b) {
    const __m256i even = _mm256_mullo_epi16(a, b);
    const __m256i odd = _mm256_mullo_epi16(_mm256_srli_epi16(a, 8), _mm256_srli_epi16(b, 8));
    return _mm256_or_si256(_mm256_and_si256(even, _mm256_set1_epi16(0x00FF)),
                           _mm256_slli_epi16(odd, 8));
  }
  static Acc minimum(Acc a, Acc b) { return _mm256_min_epu8(a, b); }
  static Acc maximum(Acc a, Acc b) { return _mm256_max_epu8(a, b); }
  static Acc divide(Acc a, Divisor n) { return divide_lanes<DType::kU8, kLanes>(a, n); }
};

}  // namespace

void reduce_avx2(void* dst, const void* const* srcs, std::size_t nsrc, std::size_t count,
                 DType dtype, ReduceOp op) {
  switch (dtype) {
    case DType::kF32: return simd::reduce_with<F32>(dst, srcs, nsrc, count, dtype, op);
    case DType::kF64: return simd::reduce_with<F64>(dst, srcs, nsrc, count, dtype, op);
    case DType::kF16: return simd::reduce_with<F16>(dst, srcs, nsrc, count, dtype, op);
    case DType::kBF16: return simd::reduce_with<BF16>(dst, srcs, nsrc, count, dtype, op);
    case DType::kI32: return simd::reduce_with<I32>(dst, srcs, nsrc, count, dtype, op);
    case DType::kI64: return simd::reduce_with<I64>(dst, srcs, nsrc, count, dtype, op);
    case DType::kU8: return simd::reduce_with<U8>(dst, srcs, nsrc, count, dtype, op);
  }
}

void divide_avx2(void* data, std::size_t count, DType dtype, std::size_t divisor) {
  switch (dtype) {
    case DType::kF32: return simd::divide_with<F32>(data, count, dtype, divisor);
    case DType::kF64: return simd::divide_with<F64>(data, count, dtype, divisor);
    case DType::kF16: return simd::divide_with<F16>(data, count, dtype, divisor);
    case DType::kBF16: return simd::divide_with<BF16>(data, count, dtype, divisor);
    case DType::kI32: return simd::divide_with<I32>(data, count, dtype, divisor);
    case DType::kI64: return simd::divide_with<I64>(data, count, dtype, divisor);
    case DType::kU8: return simd::divide_with<U8>(data, count, dtype, divisor);
  }
}

}  // namespace ringsync::reduce::detail

#pragma GCC pop_options
