#include "service/execution/ring_staging.h"

#include "common/log.h"

#include <algorithm>

namespace ringsync::service::execution {

RingStaging::RingStaging(cuda::ChunkCopier& engine, StagedBuffers buffers, std::size_t count,
                         DType dtype, int nodes, int rank, std::size_t chunk_bytes)
    : lanes_(engine, 2 * static_cast<std::size_t>(std::max(nodes, 1))),
      buffers_(buffers),
      segments_(static_cast<std::size_t>(std::max(nodes, 1))) {
  const std::size_t elem = std::max<std::size_t>(dtype_size(dtype), 1);
  chunk_bytes_ = std::max<std::size_t>(chunk_bytes / elem, 1) * elem;
  const int n = static_cast<int>(segments_.size());
  const ring::Partition partition(count, n, 1);
  for (int s = 0; s < n; ++s) {
    fill_order_.push_back(ring::ring_index(rank - 1 - s, n));
    drain_order_.push_back(ring::ring_index(rank - s, n));
  }
  for (int s = 0; s < n; ++s) {
    Segment& seg = segments_[static_cast<std::size_t>(s)];
    const ring::Range range = partition.segment(s);
    seg.begin = range.begin * elem;
    seg.bytes = range.count * elem;
    if (seg.bytes == 0) continue;
    const std::size_t chunks = (seg.bytes + chunk_bytes_ - 1) / chunk_bytes_;
    seg.slots.emplace(cuda::StagingBuffers::view(buffers_.host + seg.begin, chunk_bytes_, chunks));
  }
  // Lanes in fill order, then drain order: the engine sees the copies in the
  // order the ring wants them.
  for (std::size_t i = 0; i < fill_order_.size(); ++i) {
    Segment& seg = segments_[static_cast<std::size_t>(fill_order_[i])];
    if (seg.bytes == 0) continue;
    seg.fill = std::make_unique<cuda::StagingPipeline>(
        lanes_.lane(i), *seg.slots, cuda::StagingPipeline::Direction::kOut,
        const_cast<std::byte*>(buffers_.device_in) + seg.begin, seg.bytes,
        [this, &seg](const cuda::StagingChunk& c) {
          seg.filled = c.offset + c.bytes;  // chunks land in order
          (void)seg.fill->release(c.index);  // the slot is the chunk's place: nothing to free
        });
  }
  for (std::size_t i = 0; i < drain_order_.size(); ++i) {
    Segment& seg = segments_[static_cast<std::size_t>(drain_order_[i])];
    if (seg.bytes == 0) continue;
    seg.drain = std::make_unique<cuda::StagingPipeline>(
        lanes_.lane(fill_order_.size() + i), *seg.slots, cuda::StagingPipeline::Direction::kIn,
        buffers_.device_out + seg.begin, seg.bytes,
        [&seg](const cuda::StagingChunk& c) { seg.offered.push_back(c); });
  }
}

RingStaging::~RingStaging() {
  if (idle()) return;
  Status drained = lanes_.engine().drain();
  if (!drained.ok()) RS_LOG(warn, "ring") << "GPU staging copies failed while the ring stopped: " << drained.message();
}

template <typename Fn>
void RingStaging::each_overlap(const std::byte* at, std::size_t bytes, Fn&& fn) {
  const std::size_t from = static_cast<std::size_t>(at - buffers_.host);
  const std::size_t to = from + bytes;
  for (Segment& seg : segments_) {
    const std::size_t lo = std::max(from, seg.begin), hi = std::min(to, seg.begin + seg.bytes);
    if (lo < hi) fn(seg, lo - seg.begin, hi - seg.begin);
  }
}

bool RingStaging::filled(const std::byte* at, std::size_t bytes) {
  bool all = true;
  each_overlap(at, bytes, [&](Segment& seg, std::size_t, std::size_t to) { all = all && to <= seg.filled; });
  return all;
}

void RingStaging::finished(const std::byte* at, std::size_t bytes) {
  each_overlap(at, bytes, [&](Segment& seg, std::size_t from, std::size_t to) {
    if (from > seg.final) {
      // Past the final prefix (the ring lands chunks in order, so this waits
      // only if a later one comes first): kept until the gap closes.
      auto& end = seg.final_later[from];
      end = std::max(end, to);
      return;
    }
    seg.final = std::max(seg.final, to);
    for (auto it = seg.final_later.begin(); it != seg.final_later.end() && it->first <= seg.final;) {
      seg.final = std::max(seg.final, it->second);
      it = seg.final_later.erase(it);
    }
    release_final(seg);
  });
}

// Hands the drain pipeline back every offered slot whose bytes are final: each
// becomes a host -> device copy.
void RingStaging::release_final(Segment& seg) {
  if (!failure_.ok() || !seg.drain) return;
  auto ready = std::partition(seg.offered.begin(), seg.offered.end(),
                              [&](const cuda::StagingChunk& c) { return c.offset + c.bytes > seg.final; });
  std::vector<cuda::StagingChunk> releasing(ready, seg.offered.end());
  seg.offered.erase(ready, seg.offered.end());
  for (const auto& c : releasing) {
    Status started = seg.drain->release(c.index);
    if (!started.ok()) return fail(started);
  }
}

void RingStaging::progress() {
  for (int s : fill_order_) {
    Segment& seg = segments_[static_cast<std::size_t>(s)];
    if (seg.fill && seg.fill->progress() == cuda::StagingPipeline::State::kFailed) fail(seg.fill->status());
  }
  for (int s : drain_order_) {
    Segment& seg = segments_[static_cast<std::size_t>(s)];
    if (!seg.drain) continue;
    if (seg.drain->progress() == cuda::StagingPipeline::State::kFailed) fail(seg.drain->status());
    release_final(seg);  // slots offered by this progress() whose data is final already
  }
}

void RingStaging::abort(const Status& why) { fail(why); }

void RingStaging::fail(const Status& why) {
  if (!failure_.ok()) return;
  failure_ = why.ok() ? Status::Internal("staging failed") : why;
  for (Segment& seg : segments_) {
    if (seg.fill) seg.fill->abort(failure_);
    if (seg.drain) seg.drain->abort(failure_);
  }
}

bool RingStaging::all_filled() const {
  return std::all_of(segments_.begin(), segments_.end(), [](const Segment& s) { return s.filled == s.bytes; });
}

bool RingStaging::drained() const {
  return std::all_of(segments_.begin(), segments_.end(), [](const Segment& s) {
    return !s.drain || s.drain->state() == cuda::StagingPipeline::State::kDone;
  });
}

}  // namespace ringsync::service::execution
