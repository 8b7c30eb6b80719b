// Barrier: no data; every rank returns once every rank of the job arrived.
// On one node that is when the last local rank submitted; between nodes, the
// plan node 0 makes once every node was ready (route: plan only).
#include "service/collective/kind.h"
#include "service/collective/kinds.h"
#include "service/ring/task.h"

namespace ringsync::service::collective {
namespace {

class Barrier final : public Kind {
 public:
  std::size_t local_pieces(const LocalGrid&) const override { return 0; }
  void local_piece(const LocalGrid&, std::size_t) const override {}
  Status on_device(const LocalPlan&, std::size_t, device::DeviceQueue&) const override { return Status::Ok(); }
  RingBuffer ring_buffer(const OperationShape&, std::span<const std::size_t>) const override { return {}; }
  void lay_out(NodeLayout&) const override {}
  Staging staging() const override { return Staging::kNone; }
  std::unique_ptr<ring::Task> task(const TaskArgs&) const override { return nullptr; }
  const char* data_phase(route::Path) const override { return "BARRIER"; }
};

}  // namespace

const Kind& barrier_kind() {
  static const Barrier kind;
  return kind;
}

}  // namespace ringsync::service::collective
