#include "service/collective/kinds.h"

namespace ringsync::service::collective {

const Kind& kind_of(wire::CollectiveKind kind) {
  // By CollectiveKind, in the enum's order (common/collective_kind.h).
  static const Kind* const kinds[] = {&allreduce_kind(), &broadcast_kind(),      &allgather_kind(),
                                      &barrier_kind(),   &reduce_scatter_kind(), &alltoall_kind(),
                                      &reduce_kind(),    &gather_kind(),         &scatter_kind()};
  static_assert(sizeof(kinds) / sizeof(kinds[0]) == static_cast<std::size_t>(wire::kLastCollectiveKind) + 1,
                "one per kind");
  const auto i = static_cast<std::size_t>(kind);
  return i < sizeof(kinds) / sizeof(kinds[0]) ? *kinds[i] : barrier_kind();
}

}  // namespace ringsync::service::collective
