#include "bench/bench_collective.h"

#include <algorithm>

namespace ringsync::bench {

std::string_view collective_name(Collective c) {
  switch (c) {
    case Collective::kAllreduce: return "allreduce";
    case Collective::kBroadcast: return "broadcast";
    case Collective::kAllgather: return "allgather";
    case Collective::kReduceScatter: return "reduce_scatter";
    case Collective::kAlltoall: return "alltoall";
  }
  return "?";
}

bool reduces(Collective c) {
  return c == Collective::kAllreduce || c == Collective::kReduceScatter;
}

Shape shape_of(Collective c, std::uint64_t requested_bytes, std::size_t elem_size, int ranks) {
  const std::uint64_t elements = std::max<std::uint64_t>(1, requested_bytes / elem_size);
  const auto n = static_cast<std::uint64_t>(ranks);
  Shape s;
  if (c == Collective::kAllgather || c == Collective::kReduceScatter ||
      c == Collective::kAlltoall) {
    // n blocks of count: the output of allgather, the input of reduce_scatter, both
    // sides of alltoall.
    s.count = std::max<std::uint64_t>(1, elements / n);
    s.send_count = c == Collective::kAllgather ? s.count : s.count * n;
    s.recv_count = c == Collective::kReduceScatter ? s.count : s.count * n;
    s.bytes = s.count * n * elem_size;
  } else {
    s.count = elements;
    s.send_count = s.recv_count = elements;
    s.bytes = elements * elem_size;
  }
  return s;
}

double bus_factor(Collective c, int ranks) {
  const double n = ranks;
  switch (c) {
    case Collective::kAllreduce: return 2.0 * (n - 1) / n;
    case Collective::kBroadcast: return 1.0;
    case Collective::kAllgather:
    case Collective::kReduceScatter:
    case Collective::kAlltoall: return (n - 1) / n;
  }
  return 1.0;
}

rs_status_t submit(rs_context_t* ctx, const char* name, Collective c, const Shape& shape,
                   const void* send, void* recv, DType dtype, ReduceOp op, int root,
                   rs_request_t** request) {
  const auto type = static_cast<rs_dtype_t>(dtype);
  switch (c) {
    case Collective::kAllreduce:
      return rs_allreduce_async(ctx, name, send, recv, shape.count, type, static_cast<rs_op_t>(op),
                                request);
    case Collective::kBroadcast:
      return rs_broadcast_async(ctx, name, send, recv, shape.count, type, root, request);
    case Collective::kAllgather:
      return rs_allgather_async(ctx, name, send, recv, shape.send_count, type, request);
    case Collective::kReduceScatter:
      return rs_reduce_scatter_async(ctx, name, send, recv, shape.recv_count, type,
                                     static_cast<rs_op_t>(op), request);
    case Collective::kAlltoall:
      return rs_alltoall_async(ctx, name, send, recv, shape.count, type, request);
  }
  return RS_INVALID_ARGUMENT;
}

}  // namespace ringsync::bench
