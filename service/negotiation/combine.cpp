#include "service/negotiation/combine.h"

#include "common/reduce.h"

namespace ringsync::service::negotiation {

void combine(const peer_wire::ReadyTensor& t, const std::vector<const void*>& node_data, std::uint64_t ranks,
             std::uint8_t* out) {
  // Nodes summed their ranks for avg; the job's rank count divides once, here.
  const ReduceOp node_op = t.op == ReduceOp::kAvg ? ReduceOp::kSum : t.op;
  reduce::reduce(out, node_data.data(), node_data.size(), t.count, t.dtype, node_op);
  if (t.op == ReduceOp::kAvg) reduce::divide(out, t.count, t.dtype, ranks);
}

}  // namespace ringsync::service::negotiation
