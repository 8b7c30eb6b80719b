// The scalar reference reduction: the definition every vector kernel must match.
#include "common/reduce.h"
#include "common/reduce_kernels.h"
#include "common/reduce_scalar.h"

namespace ringsync::reduce {
namespace detail {
namespace {

template <class E, class Op>
void fold_range(void* dst, const void* const* srcs, std::size_t nsrc, std::size_t begin,
                std::size_t end, Op op, bool avg) {
  using Stored = typename E::Stored;
  using Acc = typename E::Acc;
  for (std::size_t i = begin; i < end; ++i) {
    Acc acc = E::widen(load_element<Stored>(srcs[0], i));
    for (std::size_t k = 1; k < nsrc; ++k) {
      acc = op(acc, E::widen(load_element<Stored>(srcs[k], i)));
    }
    if (avg) {
      acc = divide_by(acc, nsrc);
    }
    store_element<Stored>(dst, i, E::narrow(acc));
  }
}

}  // namespace

void reduce_reference_range(void* dst, const void* const* srcs, std::size_t nsrc,
                            std::size_t begin, std::size_t end, DType dtype, ReduceOp op) {
  visit_dtype(dtype, [&](auto element) {
    visit_op(op, [&](auto op_fn, bool avg) {
      fold_range<decltype(element)>(dst, srcs, nsrc, begin, end, op_fn, avg);
    });
  });
}

void divide_reference_range(void* data, std::size_t begin, std::size_t end, DType dtype,
                            std::size_t divisor) {
  visit_dtype(dtype, [&](auto element) {
    using E = decltype(element);
    using Stored = typename E::Stored;
    for (std::size_t i = begin; i < end; ++i) {
      const auto quotient = divide_by(E::widen(load_element<Stored>(data, i)), divisor);
      store_element<Stored>(data, i, E::narrow(quotient));
    }
  });
}

}  // namespace detail

void reduce_reference(void* dst, const void* const* srcs, std::size_t nsrc, std::size_t count,
                      DType dtype, ReduceOp op) {
  detail::reduce_reference_range(dst, srcs, nsrc, 0, count, dtype, op);
}

void divide_reference(void* data, std::size_t count, DType dtype, std::size_t divisor) {
  detail::divide_reference_range(data, 0, count, dtype, divisor);
}

}  // namespace ringsync::reduce
