// The collectives ringsync-bench measures, and what a "size" means for each, with
// nccl-tests' definitions:
// - allreduce: size = count elements on every rank; busbw = algbw * 2(n-1)/n.
// - broadcast: size = count elements from the root; busbw = algbw.
// - allgather: size = the whole output (n ranks x count elements each; the count
//   column is the per-rank count); busbw = algbw * (n-1)/n.
// - reduce_scatter: size = the whole input of one rank (n blocks of count elements;
//   the count column is the block each rank receives); busbw = algbw * (n-1)/n.
// - alltoall: size = what one rank sends (n blocks of count elements, one to each
//   rank; the count column is one block); busbw = algbw * (n-1)/n.
// algbw = size / time in every case.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/dtype.h"
#include "ringsync/ringsync.h"

namespace ringsync::bench {

enum class Collective { kAllreduce, kBroadcast, kAllgather, kReduceScatter, kAlltoall };

// "allreduce", "broadcast", "allgather", "reduce_scatter", "alltoall" (nccl-tests' names)
std::string_view collective_name(Collective c);

// Whether c reduces (allreduce, reduce_scatter): only those take -o's reductions.
bool reduces(Collective c);

// One measured size of one collective.
struct Shape {
  std::uint64_t bytes = 0;  // the size column: what algbw divides by time
  std::size_t count = 0;    // the count column (allgather, reduce_scatter, alltoall: per block)
  std::size_t send_count = 0;
  std::size_t recv_count = 0;
};

// The shape for a requested size: whole elements, rounded down, at least one per rank
// (so the first row of a small -b may report a little more than asked).
Shape shape_of(Collective c, std::uint64_t requested_bytes, std::size_t elem_size, int ranks);

// busbw / algbw for n ranks.
double bus_factor(Collective c, int ranks);

// Submits one collective on the shared buffers; op matters to allreduce and
// reduce_scatter, root to broadcast.
rs_status_t submit(rs_context_t* ctx, const char* name, Collective c, const Shape& shape,
                   const void* send, void* recv, DType dtype, ReduceOp op, int root,
                   rs_request_t** request);

}  // namespace ringsync::bench
