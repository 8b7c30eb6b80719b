// AVX-512 (F + BW + DQ) reduction kernels. Only called after the dispatcher has checked
// the CPU (reduce.cpp); everything after the target pragma is private to this file.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "common/dtype.h"
#include "common/reduce_kernels.h"

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq")
// GCC 12's AVX-512 intrinsics start from `_mm512_undefined_*()`, which GCC 12 reports
// as "may be used uninitialized" wherever they are inlined (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include "common/reduce_simd_loop.h"

namespace ringsync::reduce::detail {
namespace {

constexpr int kRoundNearestEven = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

// ---- f32 lanes, shared by f32, f16 and bf16 ----
struct F32Ops {
  using Acc = __m512;
  using Divisor = __m512;
  static Divisor divisor(std::size_t n) { return _mm512_set1_ps(static_cast<float>(n)); }
  static Acc add(Acc a, Acc b) { return _mm512_add_ps(a, b); }
  static Acc multiply(Acc a, Acc b) { return _mm512_mul_ps(a, b); }
  static Acc divide(Acc a, Divisor n) { return _mm512_div_ps(a, n); }
  // vminps returns its second operand when either is NaN or both are zero; fix up equal
  // lanes (OR gives -0 for a +-0 pair) and lanes where the accumulator is NaN.
  static Acc minimum(Acc a, Acc b) {
    const __m512i m = _mm512_castps_si512(_mm512_min_ps(a, b));
    const __mmask16 equal = _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ);
    const __m512i fixed =
        _mm512_mask_or_epi32(m, equal, _mm512_castps_si512(a), _mm512_castps_si512(b));
    return _mm512_mask_mov_ps(_mm512_castsi512_ps(fixed), _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q),
                              a);
  }
  static Acc maximum(Acc a, Acc b) {
    const __m512i m = _mm512_castps_si512(_mm512_max_ps(a, b));
    const __mmask16 equal = _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ);
    const __m512i fixed =
        _mm512_mask_and_epi32(m, equal, _mm512_castps_si512(a), _mm512_castps_si512(b));
    return _mm512_mask_mov_ps(_mm512_castsi512_ps(fixed), _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q),
                              a);
  }
};

struct F32 : F32Ops {
  static constexpr std::size_t kLanes = 16;
  static constexpr std::size_t kElementSize = 4;
  static Acc load(const unsigned char* p) { return _mm512_loadu_ps(p); }
  static void store(unsigned char* p, Acc a) { _mm512_storeu_ps(p, a); }
  static void stream(unsigned char* p, Acc a) { _mm512_stream_ps(reinterpret_cast<float*>(p), a); }
};

struct F16 : F32Ops {
  static constexpr std::size_t kLanes = 16;
  static constexpr std::size_t kElementSize = 2;
  static Acc load(const unsigned char* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static __m256i narrow(Acc a) { return _mm512_cvtps_ph(a, kRoundNearestEven); }
  static void store(unsigned char* p, Acc a) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), narrow(a));
  }
  static void stream(unsigned char* p, Acc a) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p), narrow(a));
  }
};

struct BF16 : F32Ops {
  static constexpr std::size_t kLanes = 16;
  static constexpr std::size_t kElementSize = 2;
  static Acc load(const unsigned char* p) {
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
  // Round to nearest even by adding 0x7FFF plus the lowest kept bit; NaNs are quieted.
  static __m256i narrow(Acc a) {
    const __m512i bits = _mm512_castps_si512(a);
    const __m512i high = _mm512_srli_epi32(bits, 16);
    const __m512i bias = _mm512_add_epi32(_mm512_set1_epi32(0x7FFF),
                                          _mm512_and_si512(high, _mm512_set1_epi32(1)));
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, bias), 16);
    const __m512i quiet_nan = _mm512_or_si512(high, _mm512_set1_epi32(0x0040));
    const __mmask16 nan = _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q);
    return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(rounded, nan, quiet_nan));
  }
  static void store(unsigned char* p, Acc a) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), narrow(a));
  }
  static void stream(unsigned char* p, Acc a) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(p), narrow(a));
  }
};

struct F64 {
  using Acc = __m512d;
  using Divisor = __m512d;
  static constexpr std::size_t kLanes = 8;
  static constexpr std::size_t kElementSize = 8;
  static Divisor divisor(std::size_t n) { return _mm512_set1_pd(static_cast<double>(n)); }
  static Acc load(const unsigned char* p) { return _mm512_loadu_pd(p); }
  static void store(unsigned char* p, Acc a) { _mm512_storeu_pd(p, a); }
  static void stream(unsigned char* p, Acc a) { _mm512_stream_pd(reinterpret_cast<double*>(p), a); }
  static Acc add(Acc a, Acc b) { return _mm512_add_pd(a, b); }
  static Acc multiply(Acc a, Acc b) { return _mm512_mul_pd(a, b); }
  static Acc divide(Acc a, Divisor n) { return _mm512_div_pd(a, n); }
  static Acc minimum(Acc a, Acc b) {
    const __m512i m = _mm512_castpd_si512(_mm512_min_pd(a, b));
    const __mmask8 equal = _mm512_cmp_pd_mask(a, b, _CMP_EQ_OQ);
    const __m512i fixed =
        _mm512_mask_or_epi64(m, equal, _mm512_castpd_si512(a), _mm512_castpd_si512(b));
    return _mm512_mask_mov_pd(_mm512_castsi512_pd(fixed), _mm512_cmp_pd_mask(a, a, _CMP_UNORD_Q),
                              a);
  }
  static Acc maximum(Acc a, Acc b) {
    const __m512i m = _mm512_castpd_si512(_mm512_max_pd(a, b));
    const __mmask8 equal = _mm512_cmp_pd_mask(a, b, _CMP_EQ_OQ);
    const __m512i fixed =
        _mm512_mask_and_epi64(m, equal, _mm512_castpd_si512(a), _mm512_castpd_si512(b));
    return _mm512_mask_mov_pd(_mm512_castsi512_pd(fixed), _mm512_cmp_pd_mask(a, a, _CMP_UNORD_Q),
                              a);
  }
};

// ---- integers: one 512-bit register, wrapping arithmetic ----
struct IntLoadStore {
  using Acc = __m512i;
  static Acc load(const unsigned char* p) { return _mm512_loadu_si512(p); }
  static void store(unsigned char* p, Acc a) { _mm512_storeu_si512(p, a); }
  static void stream(unsigned char* p, Acc a) {
    _mm512_stream_si512(reinterpret_cast<__m512i*>(p), a);
  }
};

// Integer avg without a vector integer divide: the reference's scalar division per lane.
template <DType kType, std::size_t kLanes>
__m512i divide_lanes(__m512i a, std::size_t n) {
  alignas(64) unsigned char lanes[64];
  _mm512_store_si512(lanes, a);
  divide_reference_range(lanes, 0, kLanes, kType, n);
  return _mm512_load_si512(lanes);
}

struct I32 : IntLoadStore {
  using Divisor = __m512d;
  static constexpr std::size_t kLanes = 16;
  static constexpr std::size_t kElementSize = 4;
  static Divisor divisor(std::size_t n) { return _mm512_set1_pd(static_cast<double>(n)); }
  static Acc add(Acc a, Acc b) { return _mm512_add_epi32(a, b); }
  static Acc multiply(Acc a, Acc b) { return _mm512_mullo_epi32(a, b); }
  static Acc minimum(Acc a, Acc b) { return _mm512_min_epi32(a, b); }
  static Acc maximum(Acc a, Acc b) { return _mm512_max_epi32(a, b); }
  // |a| <= 2^31: the f64 quotient truncated toward zero is the exact integer quotient
  // (a non-integral quotient is at least 1/n from an integer, more than its rounding error).
  static Acc divide(Acc a, Divisor n) {
    const __m512d low = _mm512_cvtepi32_pd(_mm512_castsi512_si256(a));
    const __m512d high = _mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(a, 1));
    const __m256i q_low = _mm512_cvttpd_epi32(_mm512_div_pd(low, n));
    const __m256i q_high = _mm512_cvttpd_epi32(_mm512_div_pd(high, n));
    return _mm512_inserti64x4(_mm512_castsi256_si512(q_low), q_high, 1);
  }
};

struct I64 : IntLoadStore {
  using Divisor = std::size_t;
  static constexpr std::size_t kLanes = 8;
  static constexpr std::size_t kElementSize = 8;
  static Divisor divisor(std::size_t n) { return n; }
  static Acc add(Acc a, Acc b) { return _mm512_add_epi64(a, b); }
  static Acc multiply(Acc a, Acc b) { return _mm512_mullo_epi64(a, b); }
  static Acc minimum(Acc a, Acc b) { return _mm512_min_epi64(a, b); }
  static Acc maximum(Acc a, Acc b) { return _mm512_max_epi64(a, b); }
  static Acc divide(Acc a, Divisor n) { return divide_lanes<DType::kI64, kLanes>(a, n); }
};

struct U8 : IntLoadStore {
  using Divisor = std::size_t;
  static constexpr std::size_t kLanes = 64;
  static constexpr std::size_t kElementSize = 1;
  static Divisor divisor(std::size_t n) { return n; }
  static Acc add(Acc a, Acc b) { return _mm512_add_epi8(a, b); }
  // No byte multiply: the low byte of a 16-bit product is the byte product, so multiply
  // the even bytes in place and the odd bytes shifted down, and merge.
  static Acc multiply(Acc a, Acc b) {
    const __m512i even = _mm512_mullo_epi16(a, b);
    const __m512i odd = _mm512_mullo_epi16(_mm512_srli_epi16(a, 8), _mm512_srli_epi16(b, 8));
    return _mm512_or_si512(_mm512_and_si512(even, _mm512_set1_epi16(0x00FF)),
                           _mm512_slli_epi16(odd, 8));
  }
  static Acc minimum(Acc a, Acc b) { return _mm512_min_epu8(a, b); }
  static Acc maximum(Acc a, Acc b) { return _mm512_max_epu8(a, b); }
  static Acc divide(Acc a, Divisor n) { return divide_lanes<DType::kU8, kLanes>(a, n); }
};

}  // namespace

void reduce_avx512(void* dst, const void* const* srcs, std::size_t nsrc, std::size_t count,
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

void divide_avx512(void* data, std::size_t count, DType dtype, std::size_t divisor) {
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

#pragma GCC diagnostic pop
#pragma GCC pop_options
