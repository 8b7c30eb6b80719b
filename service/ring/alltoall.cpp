#include "service/ring/alltoall.h"

#include <algorithm>
#include <cstring>

#include "service/ring/arguments.h"
#include "service/ring/partition.h"

namespace ringsync::service::ring {

Alltoall::Alltoall(transport::Transport& transport, const void* send, void* recv,
                   std::size_t block_count, DType dtype, const RingOptions& options)
    : ChunkPipeline(transport, "alltoall", options.window, options.gate),
      send_(static_cast<const std::byte*>(send)),
      recv_(static_cast<std::byte*>(recv)),
      block_count_(block_count),
      dtype_(dtype),
      options_(options) {}

Status Alltoall::plan() {
  const int n = transport().size();
  const int r = transport().rank();
  const std::size_t total = block_count_ * static_cast<std::size_t>(n);
  Status valid = check_buffer(algorithm(), send_, total, dtype_);
  if (valid.ok()) valid = check_buffer(algorithm(), recv_, total, dtype_);
  if (valid.ok()) valid = check_options(algorithm(), options_, static_cast<std::size_t>(n - 1));
  if (!valid.ok()) return valid;
  const std::size_t elem = dtype_size(dtype_);
  const std::size_t block_bytes = block_count_ * elem;
  if (block_bytes > 0 && send_ + total * elem > recv_ && recv_ + total * elem > send_)
    return Status::InvalidArgument("ring alltoall: the send and receive buffers overlap; pass two "
                                   "separate buffers");

  // Chunks of the requested size, raised so that one block needs at most
  // kMaxChunks (a chunk number is 16 bits of a tag).
  const std::size_t chunk =
      std::max(chunk_elements(options_.chunk_bytes, dtype_),
               (block_count_ + Partition::kMaxChunks - 1) / Partition::kMaxChunks);
  if (block_bytes > 0) {
    std::memcpy(recv_ + static_cast<std::size_t>(r) * block_bytes,
                send_ + static_cast<std::size_t>(r) * block_bytes, block_bytes);
    if (gate() != nullptr) gate()->finished(recv_ + static_cast<std::size_t>(r) * block_bytes, block_bytes);
  }
  for (int s = 1; s < n; ++s) {
    const auto step = static_cast<std::uint16_t>(options_.first_step + s - 1);
    const int to = ring_index(r + s, n);
    const int from = ring_index(r - s, n);
    for (std::size_t k = 0, at = 0; at < block_count_; ++k, at += chunk) {
      const std::size_t count = std::min(chunk, block_count_ - at);
      const std::uint64_t tag = transport::make_tag(options_.sequence, step, static_cast<std::uint16_t>(k));
      plan_send({to, tag, send_ + (static_cast<std::size_t>(to) * block_count_ + at) * elem, count * elem,
                 /*after_landed=*/0, /*own_input=*/true});
      plan_recv({from, tag, recv_ + (static_cast<std::size_t>(from) * block_count_ + at) * elem, count * elem,
                 /*via_scratch=*/false, /*final=*/true});
    }
  }
  return Status::Ok();
}

}  // namespace ringsync::service::ring
