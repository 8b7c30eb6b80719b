// One copy engine shared by several staging pipelines: each lane is a ChunkCopier of
// its own (its tickets, its poll()), and every lane's copies go, in submission order,
// to the one engine underneath (one CUDA stream: copies never run out of the order
// they were asked for). A StagingPipeline assumes it is alone on its copier; the
// ring's staging runs one pipeline per segment and direction, in the order the ring
// needs them (execution/ring_staging.h), over lanes of one engine.
//
// The engine's wakeup is the lanes' owner's business (set it on the engine); a
// lane's set_wakeup() does nothing. All calls on one thread, as for the pipelines.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "cuda/chunk_copier.h"

namespace ringsync::cuda {

class CopierLanes {
 public:
  CopierLanes(ChunkCopier& engine, std::size_t lanes);
  CopierLanes(const CopierLanes&) = delete;
  CopierLanes& operator=(const CopierLanes&) = delete;
  ~CopierLanes();

  ChunkCopier& lane(std::size_t i);
  std::size_t size() const { return lanes_.size(); }
  // Copies submitted through any lane and not yet handed back by its poll().
  std::size_t in_flight() const { return in_flight_; }
  ChunkCopier& engine() { return engine_; }

 private:
  class Lane;
  // Takes what the engine finished and files it under each lane.
  void collect();

  ChunkCopier& engine_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::vector<ChunkCopier::Done> finished_;  // reused by collect()
  std::size_t in_flight_ = 0;
};

}  // namespace ringsync::cuda
