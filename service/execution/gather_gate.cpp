#include "service/execution/gather_gate.h"

#include <algorithm>
#include <climits>

#include "service/ring/partition.h"

namespace ringsync::service::execution {

GatherGate::GatherGate(const std::byte* base, std::vector<Span> pieces, std::function<void()> wake)
    : base_(base),
      pieces_(std::move(pieces)),
      by_begin_(pieces_.size()),
      in_(new std::atomic<bool>[pieces_.size()]),
      wake_(std::move(wake)) {
  for (std::size_t i = 0; i < pieces_.size(); ++i) {
    by_begin_[i] = i;
    in_[i].store(false, std::memory_order_relaxed);
  }
  std::sort(by_begin_.begin(), by_begin_.end(),
            [this](std::size_t a, std::size_t b) { return pieces_[a].begin < pieces_[b].begin; });
  for (std::size_t k = 1; k < by_begin_.size(); ++k) {
    const Span& before = pieces_[by_begin_[k - 1]];
    if (before.begin + before.bytes > pieces_[by_begin_[k]].begin) valid_ = false;
  }
}

std::vector<std::size_t> GatherGate::ring_order(std::size_t bytes, std::size_t elem, int nodes, int rank) const {
  const std::size_t e = std::max<std::size_t>(elem, 1);
  const int n = std::max(nodes, 1);
  const ring::Partition partition(bytes / e, n, 1);
  // A piece's place: the earliest the ring reads any segment it overlaps.
  auto place = [&](const Span& p) {
    int earliest = INT_MAX;
    for (int s = 0; s < n; ++s) {
      const ring::Range seg = partition.segment(s);
      const std::size_t lo = seg.begin * e, hi = (seg.begin + seg.count) * e;
      if (seg.count > 0 && p.begin < hi && lo < p.begin + std::max<std::size_t>(p.bytes, 1))
        earliest = std::min(earliest, ring::ring_index(rank - 1 - s, n));
    }
    return earliest;
  };
  std::vector<int> places(pieces_.size());
  for (std::size_t i = 0; i < pieces_.size(); ++i) places[i] = place(pieces_[i]);
  std::vector<std::size_t> order = by_begin_;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return places[a] < places[b]; });
  return order;
}

void GatherGate::mark(std::size_t piece) {
  in_[piece].store(true, std::memory_order_release);
  if (wake_) wake_();
}

bool GatherGate::filled(const std::byte* at, std::size_t bytes) {
  const std::size_t from = static_cast<std::size_t>(at - base_), to = from + bytes;
  // The first piece that ends past `from`.
  auto it = std::partition_point(by_begin_.begin(), by_begin_.end(), [&](std::size_t i) {
    return pieces_[i].begin + pieces_[i].bytes <= from;
  });
  for (; it != by_begin_.end() && pieces_[*it].begin < to; ++it)
    if (!in_[*it].load(std::memory_order_acquire)) return false;
  return true;
}

}  // namespace ringsync::service::execution
