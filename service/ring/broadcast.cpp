#include "service/ring/broadcast.h"

#include <string>

#include "service/ring/arguments.h"

namespace ringsync::service::ring {

Broadcast::Broadcast(transport::Transport& transport, void* data, std::size_t count, DType dtype,
                     int root, const RingOptions& options)
    : ChunkPipeline(transport, "broadcast", options.window),
      data_(static_cast<std::byte*>(data)),
      dtype_(dtype),
      root_(root),
      options_(options),
      chunks_(count, 1, chunk_elements(options.chunk_bytes, dtype)) {}

Status Broadcast::plan() {
  const int n = transport().size();
  const int r = transport().rank();
  Status valid = check_buffer(algorithm(), data_, chunks_.count(), dtype_);
  if (valid.ok()) valid = check_options(algorithm(), options_, 1);
  if (valid.ok() && (root_ < 0 || root_ >= n)) {
    valid = Status::InvalidArgument("ring broadcast: root " + std::to_string(root_) +
                                    " is not a node of this ring; pass a node rank in [0, " +
                                    std::to_string(n) + ")");
  }
  if (!valid.ok()) return valid;

  const std::size_t elem = dtype_size(dtype_);
  const int position = ring_index(r - root_, n);  // hops from the root
  const bool receives = position > 0;
  const bool forwards = position < n - 1;
  for (std::size_t k = 0; k < chunks_.chunks(0); ++k) {
    const Range c = chunks_.chunk(0, k);
    const auto tag =
        transport::make_tag(options_.sequence, options_.first_step, static_cast<std::uint16_t>(k));
    // Chunk k arrives from the previous node, into place ...
    if (receives) {
      plan_recv({ring_index(r - 1, n), tag, data_ + c.begin * elem, c.count * elem,
                 /*via_scratch=*/false});
    }
    // ... and goes on to the next once it is here (at once on the root).
    if (forwards) {
      plan_send({ring_index(r + 1, n), tag, data_ + c.begin * elem, c.count * elem,
                 receives ? k + 1 : 0});
    }
  }
  return Status::Ok();
}

}  // namespace ringsync::service::ring
