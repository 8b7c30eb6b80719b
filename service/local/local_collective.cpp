#include "service/local/local_collective.h"

#include <algorithm>
#include <cstring>

#include "common/reduce.h"

namespace ringsync::service::local {
namespace {

void copy_unless_same(std::byte* dst, const std::byte* src, std::size_t bytes) {
  if (dst != src && bytes > 0) std::memcpy(dst, src, bytes);
}

}  // namespace

LocalCollective::LocalCollective(LocalPlan plan, std::size_t chunk_bytes)
    : plan_(std::move(plan)), elem_bytes_(dtype_size(plan_.dtype)) {
  if (elem_bytes_ == 0) elem_bytes_ = 1;
  chunk_elems_ = std::max<std::size_t>(1, chunk_bytes / elem_bytes_);
  chunks_per_rank_ = (plan_.count + chunk_elems_ - 1) / chunk_elems_;
  switch (plan_.kind) {
    case wire::CollectiveKind::kAllreduce:
    case wire::CollectiveKind::kBroadcast:
      pieces_ = chunks_per_rank_;
      break;
    case wire::CollectiveKind::kAllgather:
    case wire::CollectiveKind::kReduceScatter:
      pieces_ = chunks_per_rank_ * plan_.ranks.size();
      break;
    case wire::CollectiveKind::kAlltoall:
      pieces_ = chunks_per_rank_ * plan_.ranks.size() * plan_.ranks.size();
      break;
    case wire::CollectiveKind::kBarrier:
      pieces_ = 0;
      break;
  }
}

void LocalCollective::run_piece(std::size_t i) const {
  switch (plan_.kind) {
    case wire::CollectiveKind::kAllreduce: allreduce_piece(i); break;
    case wire::CollectiveKind::kBroadcast: broadcast_piece(i); break;
    case wire::CollectiveKind::kAllgather: allgather_piece(i); break;
    case wire::CollectiveKind::kReduceScatter: reduce_scatter_piece(i); break;
    case wire::CollectiveKind::kAlltoall: alltoall_piece(i); break;
    case wire::CollectiveKind::kBarrier: break;
  }
}

// Chunk i of every rank is reduced into rank 0's result, which is then copied
// to the other ranks. Each rank's chunk i is read before any write to it, so
// in-place buffers are safe.
void LocalCollective::allreduce_piece(std::size_t i) const {
  const std::size_t first = i * chunk_elems_;
  const std::size_t n = std::min(chunk_elems_, plan_.count - first);
  const std::size_t offset = first * elem_bytes_;
  const std::size_t bytes = n * elem_bytes_;

  std::vector<const void*> srcs(plan_.ranks.size());
  for (std::size_t r = 0; r < plan_.ranks.size(); ++r) srcs[r] = plan_.ranks[r].send + offset;
  std::byte* result = plan_.ranks[0].recv + offset;
  reduce::reduce(result, srcs.data(), srcs.size(), n, plan_.dtype, plan_.op);
  for (std::size_t r = 1; r < plan_.ranks.size(); ++r)
    copy_unless_same(plan_.ranks[r].recv + offset, result, bytes);
}

void LocalCollective::broadcast_piece(std::size_t i) const {
  const std::size_t first = i * chunk_elems_;
  const std::size_t n = std::min(chunk_elems_, plan_.count - first);
  const std::size_t offset = first * elem_bytes_;
  const std::byte* src = plan_.ranks[plan_.root].send + offset;
  for (const auto& rank : plan_.ranks) copy_unless_same(rank.recv + offset, src, n * elem_bytes_);
}

// Piece i copies chunk (i % chunks) of rank (i / chunks)'s contribution into
// that rank's slot of every receive buffer.
void LocalCollective::allgather_piece(std::size_t i) const {
  const std::size_t source = i / chunks_per_rank_;
  const std::size_t chunk = i % chunks_per_rank_;
  const std::size_t first = chunk * chunk_elems_;
  const std::size_t n = std::min(chunk_elems_, plan_.count - first);
  const std::size_t slot = (source * plan_.count + first) * elem_bytes_;
  const std::byte* src = plan_.ranks[source].send + first * elem_bytes_;
  for (const auto& rank : plan_.ranks) copy_unless_same(rank.recv + slot, src, n * elem_bytes_);
}

// Piece i reduces chunk (i % chunks) of block b = i / chunks of every rank's
// input into rank b's output. In place, rank b's output is block b of its own
// input, which only this piece reads and writes (read before written).
void LocalCollective::reduce_scatter_piece(std::size_t i) const {
  const std::size_t block = i / chunks_per_rank_;
  const std::size_t first = (i % chunks_per_rank_) * chunk_elems_;
  const std::size_t n = std::min(chunk_elems_, plan_.count - first);
  const std::size_t offset = (block * plan_.count + first) * elem_bytes_;
  std::vector<const void*> srcs(plan_.ranks.size());
  for (std::size_t r = 0; r < plan_.ranks.size(); ++r) srcs[r] = plan_.ranks[r].send + offset;
  reduce::reduce(plan_.ranks[block].recv + first * elem_bytes_, srcs.data(), srcs.size(), n,
                 plan_.dtype, plan_.op);
}

// Piece i copies chunk (i % chunks) of block `to` of rank `from`'s input into
// block `from` of rank `to`'s output (inputs and outputs never overlap).
void LocalCollective::alltoall_piece(std::size_t i) const {
  const std::size_t ranks = plan_.ranks.size();
  const std::size_t pair = i / chunks_per_rank_;
  const std::size_t from = pair / ranks, to = pair % ranks;
  const std::size_t first = (i % chunks_per_rank_) * chunk_elems_;
  const std::size_t n = std::min(chunk_elems_, plan_.count - first);
  std::memcpy(plan_.ranks[to].recv + (from * plan_.count + first) * elem_bytes_,
              plan_.ranks[from].send + (to * plan_.count + first) * elem_bytes_, n * elem_bytes_);
}

}  // namespace ringsync::service::local
