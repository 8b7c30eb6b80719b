// The loop reduce-scatter and allgather share: one pass around the ring over
// a partitioned buffer (partition.h), N-1 steps. At step s this node sends
// segment r+shift-s to its right neighbour and receives segment r+shift-s-1
// from its left, chunk by chunk. From step 1 on, the segment it sends is the
// one it received at the step before, so chunk k sent forwards chunk k
// received then, and goes once that has landed.
//
//   shift  0: allgather, which starts from this node's own segment r;
//   shift -1: reduce-scatter, which ends with segment r complete here.
//
// The algorithm says what a send and a receive are (the callbacks), so the
// reduction stays beside its receive in the algorithm's own file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "service/ring/chunk_pipeline.h"
#include "service/ring/partition.h"

namespace ringsync::service::ring {

struct RingChunk {
  int step = 0;           // 0 .. N-2
  int segment = 0;
  std::uint16_t index = 0;  // chunk k of the segment (the tag's chunk field)
  Range range;            // elements of the whole buffer
};

// send(chunk, forwards): plan chunk's send; forwards is the receive it passes
// on (none at step 0). recv(chunk) -> PlannedRecv: plan chunk's receive.
template <typename Send, typename Recv>
void plan_ring_pass(int rank, int size, const Partition& partition, int shift, Send&& send, Recv&& recv) {
  std::vector<PlannedRecv> received, last_step;
  for (int s = 0; s + 1 < size; ++s) {
    const int out = ring_index(rank + shift - s, size);
    for (std::size_t k = 0; k < partition.chunks(out); ++k) {
      const RingChunk chunk{s, out, static_cast<std::uint16_t>(k), partition.chunk(out, k)};
      send(chunk, s == 0 ? std::nullopt : std::optional<PlannedRecv>(last_step[k]));
    }
    const int in = ring_index(rank + shift - s - 1, size);
    received.clear();
    for (std::size_t k = 0; k < partition.chunks(in); ++k)
      received.push_back(recv(RingChunk{s, in, static_cast<std::uint16_t>(k), partition.chunk(in, k)}));
    std::swap(last_step, received);
  }
}

}  // namespace ringsync::service::ring
