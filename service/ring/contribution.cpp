#include "service/ring/contribution.h"

#include "common/reduce.h"

namespace ringsync::service::ring {

void fold_contribution(std::byte* place, const std::byte* scratch, std::size_t bytes, DType dtype, ReduceOp op,
                       std::size_t divisor, bool last) {
  fold_contribution(place, place, scratch, bytes, dtype, op, divisor, last);
}

void fold_contribution(std::byte* place, const std::byte* own, const std::byte* scratch, std::size_t bytes,
                       DType dtype, ReduceOp op, std::size_t divisor, bool last) {
  const std::size_t count = bytes / dtype_size(dtype);
  const void* srcs[2] = {own, scratch};
  reduce::reduce(place, srcs, 2, count, dtype, op == ReduceOp::kAvg ? ReduceOp::kSum : op);
  if (op == ReduceOp::kAvg && last) reduce::divide(place, count, dtype, divisor);
}

void finish_alone(std::byte* data, std::size_t count, DType dtype, ReduceOp op, std::size_t divisor,
                  StageGate* gate) {
  if (op == ReduceOp::kAvg) reduce::divide(data, count, dtype, divisor);
  if (gate != nullptr && count > 0) gate->finished(data, count * dtype_size(dtype));
}

}  // namespace ringsync::service::ring
