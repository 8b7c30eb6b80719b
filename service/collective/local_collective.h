// The data movement of one collective among the local ranks of a node alone,
// split into independent pieces that the WorkPool runs in parallel; the kind
// says what the pieces are (kind.h). Pure memory work: no sockets, no state;
// tested with plain buffers.
#pragma once

#include <cstddef>

#include "service/collective/kind.h"
#include "service/collective/plan.h"

namespace ringsync::service::collective {

class LocalCollective {
 public:
  LocalCollective(LocalPlan plan, std::size_t chunk_bytes);

  std::size_t pieces() const { return pieces_; }
  // Safe to call concurrently for different i.
  void run_piece(std::size_t i) const { kind_->local_piece(grid(), i); }

 private:
  LocalGrid grid() const { return {plan_, elem_bytes_, chunk_elems_, chunks_per_rank_}; }

  LocalPlan plan_;
  const Kind* kind_;
  std::size_t elem_bytes_ = 1;
  std::size_t chunk_elems_ = 1;
  std::size_t chunks_per_rank_ = 0;  // chunks covering `count` elements
  std::size_t pieces_ = 0;
};

}  // namespace ringsync::service::collective
