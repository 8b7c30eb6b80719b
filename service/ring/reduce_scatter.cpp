#include "service/ring/reduce_scatter.h"

#include <vector>

#include "common/reduce.h"
#include "service/ring/arguments.h"

namespace ringsync::service::ring {

ReduceScatter::ReduceScatter(transport::Transport& transport, void* data, std::size_t count,
                             DType dtype, ReduceOp op, std::size_t divisor,
                             const RingOptions& options)
    : ChunkPipeline(transport, "reduce-scatter", options.window, options.gate),
      data_(static_cast<std::byte*>(data)),
      dtype_(dtype),
      op_(op),
      divisor_(divisor),
      options_(options),
      partition_(count, transport.size(), chunk_elements(options.chunk_bytes, dtype)) {}

Status ReduceScatter::plan() {
  const int n = transport().size();
  const int r = transport().rank();
  Status valid = check_buffer(algorithm(), data_, partition_.count(), dtype_);
  if (valid.ok()) valid = check_reduction(algorithm(), op_, divisor_);
  if (valid.ok()) valid = check_options(algorithm(), options_, static_cast<std::size_t>(n - 1));
  if (!valid.ok()) return valid;

  const std::size_t elem = dtype_size(dtype_);
  const int right = ring_index(r + 1, n);
  const int left = ring_index(r - 1, n);
  // first_recv[s]: index of step s's first receive, so a send can name the
  // receive whose result it forwards.
  std::vector<std::size_t> first_recv(static_cast<std::size_t>(n), 0);
  std::size_t planned_recvs = 0;
  for (int s = 0; s < n - 1; ++s) {
    const auto step = static_cast<std::uint16_t>(options_.first_step + s);
    // Send segment r-s-1: this node's own data at step 0, afterwards the
    // partial result received and reduced at step s-1.
    const int send_segment = ring_index(r - s - 1, n);
    for (std::size_t k = 0; k < partition_.chunks(send_segment); ++k) {
      const Range c = partition_.chunk(send_segment, k);
      const std::size_t after = s == 0 ? 0 : first_recv[static_cast<std::size_t>(s - 1)] + k + 1;
      plan_send({right, transport::make_tag(options_.sequence, step, static_cast<std::uint16_t>(k)),
                 data_ + c.begin * elem, c.count * elem, after, /*own_input=*/s == 0});
    }
    // Receive segment r-s-2 from the left and reduce it into place.
    const int recv_segment = ring_index(r - s - 2, n);
    first_recv[static_cast<std::size_t>(s)] = planned_recvs;
    for (std::size_t k = 0; k < partition_.chunks(recv_segment); ++k) {
      const Range c = partition_.chunk(recv_segment, k);
      planned_recvs =
          1 +
          plan_recv({left,
                     transport::make_tag(options_.sequence, step, static_cast<std::uint16_t>(k)),
                     data_ + c.begin * elem, c.count * elem, /*via_scratch=*/true});
    }
  }
  // The last step's receives complete this node's segment.
  last_step_first_recv_ = n >= 2 ? first_recv[static_cast<std::size_t>(n - 2)] : 0;

  // With one node the buffer is already the whole reduction; avg still divides.
  if (n == 1 && op_ == ReduceOp::kAvg) reduce::divide(data_, partition_.count(), dtype_, divisor_);
  return Status::Ok();
}

void ReduceScatter::land(std::size_t index, const Recv& recv, const std::byte* scratch) {
  const std::size_t count = recv.bytes / dtype_size(dtype_);
  const void* srcs[2] = {recv.place, scratch};
  reduce::reduce(recv.place, srcs, 2, count, dtype_, op_ == ReduceOp::kAvg ? ReduceOp::kSum : op_);
  if (op_ == ReduceOp::kAvg && index >= last_step_first_recv_) {
    reduce::divide(recv.place, count, dtype_, divisor_);
  }
}

}  // namespace ringsync::service::ring
