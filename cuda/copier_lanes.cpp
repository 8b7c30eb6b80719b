#include "cuda/copier_lanes.h"

namespace ringsync::cuda {

namespace {
// A lane's ticket on the engine: the lane in the top 16 bits, its own below.
constexpr int kLaneShift = 48;
constexpr std::uint64_t kTicketMask = (std::uint64_t{1} << kLaneShift) - 1;
}  // namespace

class CopierLanes::Lane final : public ChunkCopier {
 public:
  Lane(CopierLanes& owner, std::uint64_t index) : owner_(owner), index_(index) {}

  Status pin(void* host, std::size_t bytes) override { return owner_.engine_.pin(host, bytes); }
  void unpin(void* host) override { owner_.engine_.unpin(host); }
  Status submit(std::uint64_t ticket, Direction direction, void* dst, const void* src,
                std::size_t bytes) override {
    if (ticket > kTicketMask) return Status::InvalidArgument("copier lane: ticket out of range");
    Status queued = owner_.engine_.submit((index_ << kLaneShift) | ticket, direction, dst, src, bytes);
    if (queued.ok()) ++owner_.in_flight_;
    return queued;
  }
  void poll(std::vector<Done>& done) override {
    owner_.collect();
    for (auto& d : finished_) done.push_back(std::move(d));
    owner_.in_flight_ -= finished_.size();
    finished_.clear();
  }
  void set_wakeup(std::function<void()>) override {}
  Status drain() override { return owner_.engine_.drain(); }

  std::vector<Done> finished_;  // the engine finished these; this lane's poll() hands them over

 private:
  CopierLanes& owner_;
  std::uint64_t index_;
};

CopierLanes::CopierLanes(ChunkCopier& engine, std::size_t lanes) : engine_(engine) {
  for (std::size_t i = 0; i < lanes; ++i) lanes_.push_back(std::make_unique<Lane>(*this, i));
}

CopierLanes::~CopierLanes() = default;

ChunkCopier& CopierLanes::lane(std::size_t i) { return *lanes_[i]; }

void CopierLanes::collect() {
  finished_.clear();
  engine_.poll(finished_);
  for (auto& d : finished_) {
    const std::uint64_t lane = d.ticket >> kLaneShift;
    d.ticket &= kTicketMask;
    if (lane < lanes_.size()) lanes_[lane]->finished_.push_back(std::move(d));
  }
}

}  // namespace ringsync::cuda
