#include "service/ring/allgather.h"

#include <vector>

#include "service/ring/arguments.h"

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
  std::vector<std::size_t> first_recv(static_cast<std::size_t>(n), 0);
  std::size_t planned_recvs = 0;
  for (int s = 0; s < n - 1; ++s) {
    const auto step = static_cast<std::uint16_t>(options_.first_step + s);
    // Send segment r-s: this node's own at step 0, afterwards the one that
    // arrived at step s-1.
    const int send_segment = ring_index(r - s, n);
    for (std::size_t k = 0; k < partition_.chunks(send_segment); ++k) {
      const Range c = partition_.chunk(send_segment, k);
      const std::size_t after = s == 0 ? 0 : first_recv[static_cast<std::size_t>(s - 1)] + k + 1;
      plan_send({right, transport::make_tag(options_.sequence, step, static_cast<std::uint16_t>(k)),
                 data_ + c.begin * elem, c.count * elem, after});
    }
    // Receive segment r-s-1 from the left, into place.
    const int recv_segment = ring_index(r - s - 1, n);
    first_recv[static_cast<std::size_t>(s)] = planned_recvs;
    for (std::size_t k = 0; k < partition_.chunks(recv_segment); ++k) {
      const Range c = partition_.chunk(recv_segment, k);
      planned_recvs =
          1 +
          plan_recv({left,
                     transport::make_tag(options_.sequence, step, static_cast<std::uint16_t>(k)),
                     data_ + c.begin * elem, c.count * elem, /*via_scratch=*/false, /*final=*/true});
    }
  }
  return Status::Ok();
}

}  // namespace ringsync::service::ring
