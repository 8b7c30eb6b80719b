// Internal seams between the reduction dispatcher (reduce.cpp), the scalar reference
// (reduce_reference.cpp) and the per-instruction-set kernels (reduce_default.cpp,
// reduce_avx2.cpp, reduce_avx512.cpp). Not part of the public API.
//
// The instruction-set files compile their code under `#pragma GCC target`, so they must
// not instantiate templates or inline functions shared with other files (the linker
// could keep their AVX copy for everyone); they reach the scalar rules only through the
// plain functions declared here.
#pragma once

#include <cstddef>

#include "common/dtype.h"

namespace ringsync::reduce::detail {

// reduce_reference() on the element range [begin, end) of every buffer.
void reduce_reference_range(void* dst, const void* const* srcs, std::size_t nsrc,
                            std::size_t begin, std::size_t end, DType dtype, ReduceOp op);
// divide_reference() on the element range [begin, end).
void divide_reference_range(void* data, std::size_t begin, std::size_t end, DType dtype,
                            std::size_t divisor);

// Whether a reduction writing dst_bytes from nsrc inputs should bypass the caches with
// streaming stores: only when its working set is far larger than the last-level cache,
// so a result that is about to be read again (a pipelined chunk) stays cached.
bool prefer_streaming_stores(std::size_t dst_bytes, std::size_t nsrc);

// Portable C++ kernels (compiled for the baseline x86-64, vectorized by the compiler).
void reduce_default(void* dst, const void* const* srcs, std::size_t nsrc, std::size_t count,
                    DType dtype, ReduceOp op);
void divide_default(void* data, std::size_t count, DType dtype, std::size_t divisor);

// AVX2 + F16C kernels.
void reduce_avx2(void* dst, const void* const* srcs, std::size_t nsrc, std::size_t count,
                 DType dtype, ReduceOp op);
void divide_avx2(void* data, std::size_t count, DType dtype, std::size_t divisor);

// AVX-512 F + BW + DQ kernels.
void reduce_avx512(void* dst, const void* const* srcs, std::size_t nsrc, std::size_t count,
                   DType dtype, ReduceOp op);
void divide_avx512(void* data, std::size_t count, DType dtype, std::size_t divisor);

}  // namespace ringsync::reduce::detail
