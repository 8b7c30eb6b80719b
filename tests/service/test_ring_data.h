// Inputs for ring tests whose results do not depend on the order of the
// reduction, so the ring's result can be checked bit for bit against
// reduce_reference over all nodes' inputs (which folds in another order):
// - integers: any values (wrapping sum and product are order-free);
// - float sum/avg: multiples of 1/8 in [-1, 1], so every partial sum of up to
//   a few dozen nodes is exact in every float type (bf16 included);
// - float prod: +-1/2, +-1, +-2, so every partial product is an exact power of
//   two;
// - float min/max: any finite values, with signed zeros.
// Built apart (ring_data.cpp), at the build's optimization level: the test
// files of a sanitizer build are -O0, where generating the inputs of the
// large-count cases took most of the ring tests' time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/dtype.h"
#include "common/reduce.h"

namespace ringsync::service::ring::testing {

using Bytes = std::vector<std::byte>;

// One value of `dtype` (a float type) at `at`.
void store(std::byte* at, DType dtype, double value);

bool is_float(DType dtype);

// Node `rank`'s input of `count` elements for an `op` reduction.
Bytes ring_input(DType dtype, ReduceOp op, std::size_t count, int rank, std::uint32_t seed = 0);

// reduce_reference over every node's input (avg divides by inputs.size()).
Bytes reference(const std::vector<Bytes>& inputs, std::size_t count, DType dtype, ReduceOp op);

// a == b (a memcmp: vector's operator== at -O0 compares byte by byte).
bool same_bytes(const Bytes& a, const Bytes& b);

}  // namespace ringsync::service::ring::testing
