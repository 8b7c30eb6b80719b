#include "service/negotiation/inline_allreduce.h"

#include <cstring>

#include "common/reduce.h"

namespace ringsync::service::negotiation {

namespace {

std::size_t tensor_bytes(const wire::Collective& c) { return static_cast<std::size_t>(c.count) * dtype_size(c.dtype); }

}  // namespace

std::optional<std::vector<std::uint8_t>> local_reduction(const local::PendingCollective& collective,
                                                         std::uint64_t max_bytes) {
  if (max_bytes == 0 || collective.staging || collective.submissions.empty()) return std::nullopt;
  const wire::Collective& c = collective.submissions.front().request;
  const std::size_t bytes = tensor_bytes(c);
  if (!wire::reduces_to_all(c.kind) || c.memory != wire::Memory::kHost || bytes == 0 ||
      bytes > max_bytes)
    return std::nullopt;
  std::vector<const void*> srcs;
  for (const auto& s : collective.submissions) {
    if (s.request.memory != wire::Memory::kHost || s.where.send == nullptr) return std::nullopt;
    srcs.push_back(s.where.send);
  }
  std::vector<std::uint8_t> out(bytes);
  reduce::reduce(out.data(), srcs.data(), srcs.size(), c.count, c.dtype,
                 c.op == ReduceOp::kAvg ? ReduceOp::kSum : c.op);
  return out;
}

Status copy_result(const local::PendingCollective& collective, std::span<const std::uint8_t> result) {
  if (collective.submissions.empty()) return Status::Ok();
  const std::size_t bytes = tensor_bytes(collective.submissions.front().request);
  if (result.size() != bytes)
    return Status::Internal("the plan's result for tensor '" + collective.name + "' has " +
                            std::to_string(result.size()) + " bytes, the tensor " + std::to_string(bytes));
  for (const auto& s : collective.submissions)
    if (s.where.recv != nullptr) std::memcpy(s.where.recv, result.data(), bytes);
  return Status::Ok();
}

}  // namespace ringsync::service::negotiation
