// Portable reduction kernels for any x86-64 (and any other target): the fold runs over
// tiles of elements held in a small accumulator array, one input at a time, so every
// inner loop is a contiguous, branch-light loop the compiler vectorizes for the
// baseline instruction set. The per-element fold order is the reference's.
#include <algorithm>

#include "common/reduce_kernels.h"
#include "common/reduce_scalar.h"

namespace ringsync::reduce::detail {
namespace {

// 4 KiB of f32 accumulators: stays in L1 while every input streams through it.
constexpr std::size_t kTileElements = 1024;

template <class E, class Op>
void fold_tiles(void* dst, const void* const* srcs, std::size_t nsrc, std::size_t count, Op op,
                bool avg, std::size_t divisor) {
  using Stored = typename E::Stored;
  using Acc = typename E::Acc;
  Acc acc[kTileElements];
  for (std::size_t base = 0; base < count; base += kTileElements) {
    const std::size_t n = std::min(kTileElements, count - base);
    for (std::size_t j = 0; j < n; ++j) {
      acc[j] = E::widen(load_element<Stored>(srcs[0], base + j));
    }
    for (std::size_t k = 1; k < nsrc; ++k) {
      const void* src = srcs[k];
      for (std::size_t j = 0; j < n; ++j) {
        acc[j] = op(acc[j], E::widen(load_element<Stored>(src, base + j)));
      }
    }
    if (avg) {
      for (std::size_t j = 0; j < n; ++j) {
        acc[j] = divide_by(acc[j], divisor);
      }
    }
    // Every input of this tile has been read before any of it is written, so dst may
    // be one of the inputs.
    for (std::size_t j = 0; j < n; ++j) {
      store_element<Stored>(dst, base + j, E::narrow(acc[j]));
    }
  }
}

}  // namespace

void reduce_default(void* dst, const void* const* srcs, std::size_t nsrc, std::size_t count,
                    DType dtype, ReduceOp op) {
  visit_dtype(dtype, [&](auto element) {
    visit_op(op, [&](auto op_fn, bool avg) {
      fold_tiles<decltype(element)>(dst, srcs, nsrc, count, op_fn, avg, nsrc);
    });
  });
}

void divide_default(void* data, std::size_t count, DType dtype, std::size_t divisor) {
  const void* const srcs[1] = {data};
  visit_dtype(dtype, [&](auto element) {
    fold_tiles<decltype(element)>(data, srcs, 1, count, AddOp{}, true, divisor);
  });
}

}  // namespace ringsync::reduce::detail
