// CPU reduction kernels: element-wise sum/avg/min/max/prod of N buffers into one.
//
// Semantics (reduce_reference is the definition; the vector kernels match it bit for bit):
// - dst[i] = op(srcs[0][i], ..., srcs[nsrc-1][i]), folded left to right:
//   acc = in0; acc = acc op in1; ...; then acc is finished (avg) and stored.
// - f32 and f64 accumulate in their own type. f16 and bf16 are widened to f32,
//   accumulated in f32 across all inputs, and rounded once to the output type
//   (round to nearest even, overflow -> inf, NaN stays NaN).
// - Avg = sum, then divide by nsrc: floats in the accumulation type (f16/bf16 in f32,
//   before rounding); integers by truncating division of the wrapped sum.
// - Integer sum and prod wrap (two's complement); no undefined behaviour.
// - Float min/max: a NaN input propagates. The result is the first NaN in input order,
//   bits unchanged for f32/f64 (f16/bf16 pass through the conversions, which quiet it).
//   -0.0 orders below +0.0: min(-0, +0) = -0 and max(-0, +0) = +0 in either order, so
//   min/max do not depend on the order of the inputs unless several different NaNs meet.
// - NaN payloads of sum/avg/prod are not specified when two NaNs meet (IEEE leaves it
//   open); the result is a NaN in every kernel.
// - The kernels assume the default floating-point environment (round to nearest,
//   no flush-to-zero / denormals-are-zero).
//
// Preconditions (callers validate; the kernels do not): dtype and op are valid enum
// values; nsrc >= 1; divisor >= 1; every buffer holds count elements; dst is either
// exactly one of the srcs (in place) or overlaps none of them. Buffers need no
// particular alignment. The kernels are single-threaded: callers split the work.
#pragma once

#include <cstddef>
#include <span>

#include "common/dtype.h"

namespace ringsync::reduce {

// The fastest kernel this CPU runs (see kernel_isa()).
void reduce(void* dst, const void* const* srcs, std::size_t nsrc, std::size_t count, DType dtype,
            ReduceOp op);
// Same contract, plain scalar loops: the definition the vector kernels are tested against.
void reduce_reference(void* dst, const void* const* srcs, std::size_t nsrc, std::size_t count,
                      DType dtype, ReduceOp op);

// data[i] /= divisor, the avg finishing step of multi-stage reductions, with avg's rules:
// floats divide in the accumulation type, integers truncate toward zero.
void divide(void* data, std::size_t count, DType dtype, std::size_t divisor);
void divide_reference(void* data, std::size_t count, DType dtype, std::size_t divisor);

// The instruction-set variant reduce()/divide() use: "avx512f", "avx2" or "default".
const char* kernel_isa();

// One instruction-set variant of the kernels.
struct KernelSet {
  const char* isa;
  void (*reduce)(void* dst, const void* const* srcs, std::size_t nsrc, std::size_t count,
                 DType dtype, ReduceOp op);
  void (*divide)(void* data, std::size_t count, DType dtype, std::size_t divisor);
};

// The variants this CPU can run, best first; reduce()/divide() use the first. Tests and
// benchmarks use the list to exercise every variant the machine supports.
std::span<const KernelSet> available_kernels();

}  // namespace ringsync::reduce
