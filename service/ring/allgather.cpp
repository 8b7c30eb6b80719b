#include "service/ring/allgather.h"

#include <optional>

#include "service/ring/arguments.h"
#include "service/ring/ring_pass.h"

namespace ringsync::service::ring {

Allgather::Allgather(transport::Transport& transport, void* data, std::size_t count, DType dtype,
                     const RingOptions& options)
    : ChunkPipeline(transport, "allgather", options.window, options.gate),
      data_(static_cast<std::byte*>(data)),
      dtype_(dtype),
      options_(options),
      partition_(count, transport.size(), chunk_elements(options.chunk_bytes, dtype)) {}

Status Allgather::plan() {
  const int n = transport().size();
  const int r = transport().rank();
  Status valid = check_buffer(algorithm(), data_, partition_.count(), dtype_);
  if (valid.ok()) valid = check_options(algorithm(), options_, static_cast<std::size_t>(n - 1));
  if (!valid.ok()) return valid;

  const std::size_t elem = dtype_size(dtype_);
  const int right = ring_index(r + 1, n);
  const int left = ring_index(r - 1, n);
  // This node's own segment is final from the start: it may be copied out at once.
  if (gate() != nullptr && partition_.segment(r).count > 0) {
    const Range own = partition_.segment(r);
    gate()->finished(data_ + own.begin * elem, own.count * elem);
  }
  const auto tag = [&](const RingChunk& c) {
    return transport::make_tag(options_.sequence, static_cast<std::uint16_t>(options_.first_step + c.step), c.index);
  };
  plan_ring_pass(
      r, n, partition_, /*shift=*/0,
      // Send segment r-s: this node's own at step 0, afterwards the one that
      // arrived at step s-1.
      [&](const RingChunk& c, std::optional<PlannedRecv> forwards) {
        const Send send{right, tag(c), data_ + c.range.begin * elem, c.range.count * elem};
        forwards ? plan_send(send, *forwards) : plan_send(send);
      },
      // Receive segment r-s-1 from the left, into place: a final result.
      [&](const RingChunk& c) {
        return plan_recv(
            {left, tag(c), data_ + c.range.begin * elem, c.range.count * elem, /*via_scratch=*/false, /*final=*/true});
      });
  return Status::Ok();
}

}  // namespace ringsync::service::ring
