// Inputs whose collective results are known exactly, and the count of result
// elements that differ from them (nccl-tests' #wrong).
//
// Every input element is a small integer, or for prod a 1 or a sparse 2, chosen so
// that every partial result any reduction order can form is exact in the element
// type: sums stay within the type's exact integers (2048 for half, 256 for bfloat16,
// 254 for uint8), products within its exponent range. So the expected result does
// not depend on how the daemons split or order the work, and is compared bit for bit.
// avg is the exact sum divided as ringsync defines it (floats: in float, half and
// bfloat16 rounded once after; integers: truncating).
//
// Inputs are periodic in the element index with a prime period, so expected values
// come from one short table and checking a large result is one pass over it.
// reduce_scatter and alltoall fill a rank's whole input the same way (allreduce's
// input, a rank's data) and a block at element offset k*count is expected to hold
// the pattern from index k*count: a block from the wrong place is wrong unless
// count is a multiple of the period (1021, a prime no power-of-two size hits).
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/dtype.h"

namespace ringsync::bench {

// Writes all-ones bytes over a result buffer before a collective: NaN for the
// float types, -1 for int32/int64, 255 for uint8 — never an expected value, so an
// element the collective did not write counts as wrong.
void mark_unwritten(void* recv, std::size_t bytes);

// Rank `rank`'s allreduce input (`count` elements) for `op` among `ranks` ranks.
void fill_allreduce_input(void* send, std::size_t count, DType dtype, ReduceOp op, int rank,
                          int ranks);
// Elements of an allreduce result that differ from op over every rank's input.
std::int64_t count_allreduce_wrong(const void* recv, std::size_t count, DType dtype, ReduceOp op,
                                   int ranks);

// Rank `rank`'s own data, distinct per rank: broadcast's root sends it, and every
// rank contributes it to allgather.
void fill_rank_data(void* send, std::size_t count, DType dtype, int rank);
// Elements of a broadcast result that differ from root's data.
std::int64_t count_broadcast_wrong(const void* recv, std::size_t count, DType dtype, int root);
// Elements of an allgather result (`ranks` parts of `count`) that differ from each
// rank's data in rank order.
std::int64_t count_allgather_wrong(const void* recv, std::size_t count, DType dtype, int ranks);

// Elements of rank `rank`'s reduce_scatter result (`count` elements) that differ
// from op over block `rank` of every rank's allreduce input (fill_allreduce_input
// over count * ranks elements).
std::int64_t count_reduce_scatter_wrong(const void* recv, std::size_t count, DType dtype,
                                        ReduceOp op, int rank, int ranks);
// Elements of rank `rank`'s alltoall result (`ranks` blocks of `count`) that
// differ from block `rank` of each rank's data (fill_rank_data over count * ranks
// elements), in rank order.
std::int64_t count_alltoall_wrong(const void* recv, std::size_t count, DType dtype, int rank,
                                  int ranks);

}  // namespace ringsync::bench
