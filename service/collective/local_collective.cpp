#include "service/collective/local_collective.h"

#include <algorithm>

namespace ringsync::service::collective {

LocalCollective::LocalCollective(LocalPlan plan, std::size_t chunk_bytes)
    : plan_(std::move(plan)), kind_(&kind_of(plan_.kind)), elem_bytes_(dtype_size(plan_.dtype)) {
  if (elem_bytes_ == 0) elem_bytes_ = 1;
  chunk_elems_ = std::max<std::size_t>(1, chunk_bytes / elem_bytes_);
  chunks_per_rank_ = (plan_.count + chunk_elems_ - 1) / chunk_elems_;
  pieces_ = kind_->local_pieces(grid());
}

}  // namespace ringsync::service::collective
