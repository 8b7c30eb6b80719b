// The local ranks' contributions land in the ring buffer while a ring allreduce
// already runs over it: the work pool gathers (reduces or copies) piece by
// piece, in the order the ring reads this node's input, and the ring sends a
// chunk as soon as the pieces under it are in. Without it the ring waits for
// the whole gather with every link idle: a 64 MiB copy took 15-28 ms on a
// loaded 2-vCPU test machine, a reduction of many local ranks takes longer.
//
// filled() (the ring engine's thread) answers from one flag per piece that
// mark() (a pool thread) sets; mark() then wakes the engine, which may be
// asleep on its event fd waiting for this very piece. Bytes that no piece
// writes count as filled. finished() is not needed: the result goes out to
// the ranks after the ring (the scatter).
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "service/ring/stage_gate.h"

namespace ringsync::service::execution {

class GatherGate final : public ring::StageGate {
 public:
  struct Span {
    std::size_t begin = 0, bytes = 0;  // from the buffer's start
  };
  // pieces[i]: where piece i writes in the buffer at `base`; the spans must
  // not overlap (valid() says whether they do). wake: thread safe.
  GatherGate(const std::byte* base, std::vector<Span> pieces, std::function<void()> wake);

  // The pieces do not overlap (else do not use the gate: gather first).
  bool valid() const { return valid_; }

  // Piece indices in the order a ring allreduce of `bytes` bytes (`elem`-byte
  // elements) on `nodes` nodes reads node `rank`'s input: the segment it sends
  // at step 0 (rank - 1), then the ones it reduces into (rank - 2, ...), its
  // own (rank) last; within a segment, front to back.
  std::vector<std::size_t> ring_order(std::size_t bytes, std::size_t elem, int nodes, int rank) const;

  // Piece i is in the buffer (any thread).
  void mark(std::size_t piece);

  bool filled(const std::byte* at, std::size_t bytes) override;
  void finished(const std::byte*, std::size_t) override {}

 private:
  const std::byte* base_;
  std::vector<Span> pieces_;              // as given
  std::vector<std::size_t> by_begin_;     // piece indices sorted by begin
  std::unique_ptr<std::atomic<bool>[]> in_;  // by piece index
  std::function<void()> wake_;
  bool valid_ = true;
};

}  // namespace ringsync::service::execution
