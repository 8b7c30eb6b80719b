#include "service/ring/direct_allreduce.h"

#include <cstdint>

#include "service/ring/arguments.h"
#include "service/ring/contribution.h"
#include "service/ring/partition.h"

namespace ringsync::service::ring {

DirectAllreduce::DirectAllreduce(transport::Transport& transport, void* data, std::size_t count, DType dtype,
                                 ReduceOp op, std::size_t divisor, const RingOptions& options)
    : ChunkPipeline(transport, "direct allreduce", options.window, options.gate),
      data_(static_cast<std::byte*>(data)),
      count_(count),
      dtype_(dtype),
      op_(op),
      divisor_(divisor),
      options_(options) {}

Status DirectAllreduce::plan() {
  const int n = transport().size();
  const int r = transport().rank();
  Status valid = check_buffer(algorithm(), data_, count_, dtype_);
  if (valid.ok()) valid = check_reduction(algorithm(), op_, divisor_);
  if (valid.ok()) valid = check_options(algorithm(), options_, kTagSteps);
  if (!valid.ok()) return valid;

  const std::size_t elem = dtype_size(dtype_);
  const Partition blocks(count_, n, chunk_elements(options_.chunk_bytes, dtype_));
  if (n == 1) {
    finish_alone(data_, count_, dtype_, op_, divisor_, gate());
    return Status::Ok();
  }

  const auto tag = [&](std::size_t step, std::size_t chunk) {
    return transport::make_tag(options_.sequence, static_cast<std::uint16_t>(options_.first_step + step),
                               static_cast<std::uint16_t>(chunk));
  };
  // Block `block`'s chunks to `peer`, each once `after_landed` receives have landed.
  const auto send_block = [&](int peer, std::size_t step, int block, std::size_t after_landed, bool own_input) {
    for (std::size_t k = 0; k < blocks.chunks(block); ++k) {
      const Range c = blocks.chunk(block, k);
      plan_send({peer, tag(step, k), data_ + c.begin * elem, c.count * elem, after_landed, own_input});
    }
  };
  const auto recv_block = [&](int peer, std::size_t step, int block, bool via_scratch, bool final) {
    for (std::size_t k = 0; k < blocks.chunks(block); ++k) {
      const Range c = blocks.chunk(block, k);
      plan_recv({peer, tag(step, k), data_ + c.begin * elem, c.count * elem, via_scratch, final});
    }
  };

  // 1. Reduce-scatter: the other nodes' blocks of this node's input go out at
  // once; their contributions to block r are folded in as they land.
  for (int j = 1; j < n; ++j) {
    const int to = ring_index(r + j, n);
    send_block(to, 0, to, /*after_landed=*/0, /*own_input=*/true);
  }
  std::size_t planned = 0;
  for (int j = 1; j < n; ++j) {
    if (j == n - 1) last_contribution_ = planned;
    recv_block(ring_index(r - j, n), 0, r, /*via_scratch=*/true, /*final=*/j == n - 1);
    planned += blocks.chunks(r);
  }
  reduce_scatter_end_ = planned;

  // 2. Allgather: block r, complete once every contribution has landed, to
  // every node; theirs straight into place.
  for (int j = 1; j < n; ++j) send_block(ring_index(r + j, n), 1, r, reduce_scatter_end_, /*own_input=*/false);
  for (int j = 1; j < n; ++j) {
    const int from = ring_index(r - j, n);
    recv_block(from, 1, from, /*via_scratch=*/false, /*final=*/true);
  }
  return Status::Ok();
}

void DirectAllreduce::land(std::size_t index, const Recv& recv, const std::byte* scratch) {
  if (scratch == nullptr) return;  // arrived in place: a final result
  fold_contribution(recv.place, scratch, recv.bytes, dtype_, op_, divisor_,
                    index >= last_contribution_ && index < reduce_scatter_end_);
}

}  // namespace ringsync::service::ring
