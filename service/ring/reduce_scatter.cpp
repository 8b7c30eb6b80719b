#include "service/ring/reduce_scatter.h"

#include <cstdint>
#include <cstring>
#include <optional>

#include "common/reduce.h"
#include "service/ring/arguments.h"
#include "service/ring/contribution.h"
#include "service/ring/ring_pass.h"

namespace ringsync::service::ring {

ReduceScatter::ReduceScatter(transport::Transport& transport, void* data, std::size_t count,
                             DType dtype, ReduceOp op, std::size_t divisor,
                             const RingOptions& options)
    : ChunkPipeline(transport, "reduce-scatter", options.window, options.gate),
      data_(static_cast<std::byte*>(data)),
      input_(options.input != nullptr ? static_cast<const std::byte*>(options.input) : data_),
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
  if (valid.ok()) valid = check_input(algorithm(), input_, data_, partition_.count(), dtype_);
  if (valid.ok()) valid = check_options(algorithm(), options_, static_cast<std::size_t>(n - 1), /*reads_input=*/true);
  if (!valid.ok()) return valid;

  const std::size_t elem = dtype_size(dtype_);
  const int right = ring_index(r + 1, n);
  const int left = ring_index(r - 1, n);
  const auto tag = [&](const RingChunk& c) {
    return transport::make_tag(options_.sequence, static_cast<std::uint16_t>(options_.first_step + c.step), c.index);
  };
  last_step_first_recv_ = SIZE_MAX;
  plan_ring_pass(
      r, n, partition_, /*shift=*/-1,
      // Send segment r-s-1: this node's own data at step 0, afterwards the
      // partial result received and reduced at step s-1.
      [&](const RingChunk& c, std::optional<PlannedRecv> forwards) {
        const std::byte* from = forwards ? data_ : input_;
        const Send send{right, tag(c), from + c.range.begin * elem, c.range.count * elem, 0,
                        /*own_input=*/forwards == std::nullopt};
        forwards ? plan_send(send, *forwards) : plan_send(send);
      },
      // Receive segment r-s-2 into scratch; land() reduces it into place. The
      // last step's receives complete this node's segment.
      [&](const RingChunk& c) {
        const PlannedRecv planned =
            plan_recv({left, tag(c), data_ + c.range.begin * elem, c.range.count * elem, /*via_scratch=*/true});
        if (c.step == n - 2 && c.index == 0) last_step_first_recv_ = planned.index;
        return planned;
      });

  // With one node the input is already the whole reduction; avg still divides.
  if (n == 1 && input_ != data_ && partition_.count() > 0) std::memcpy(data_, input_, partition_.count() * elem);
  if (n == 1 && op_ == ReduceOp::kAvg) reduce::divide(data_, partition_.count(), dtype_, divisor_);
  return Status::Ok();
}

void ReduceScatter::land(std::size_t index, const Recv& recv, const std::byte* scratch) {
  const std::byte* own = input_ + (recv.place - data_);
  fold_contribution(recv.place, own, scratch, recv.bytes, dtype_, op_, divisor_, index >= last_step_first_recv_);
}

}  // namespace ringsync::service::ring
