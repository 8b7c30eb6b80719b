// What the reducing algorithms (reduce-scatter, halving-doubling, direct
// allreduce) do with a node's contributions, in one place.
#pragma once

#include <cstddef>

#include "common/dtype.h"
#include "service/ring/stage_gate.h"

namespace ringsync::service::ring {

// Folds a received contribution (`bytes` in `scratch`) into `place` with `op`
// (avg sums); `last`: it was the last contribution to `place`, so avg divides
// the result by `divisor` there, once.
void fold_contribution(std::byte* place, const std::byte* scratch, std::size_t bytes, DType dtype, ReduceOp op,
                       std::size_t divisor, bool last);
// The same, out of place: place = own op scratch, where `own` (this node's
// data for the range) is `place` itself or does not overlap it.
void fold_contribution(std::byte* place, const std::byte* own, const std::byte* scratch, std::size_t bytes,
                       DType dtype, ReduceOp op, std::size_t divisor, bool last);

// A job of one node: its buffer is already the whole reduction. Avg still
// divides, and the gate (may be null) hears that the buffer is final.
void finish_alone(std::byte* data, std::size_t count, DType dtype, ReduceOp op, std::size_t divisor,
                  StageGate* gate);

}  // namespace ringsync::service::ring
