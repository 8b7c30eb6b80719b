// Small allreduces exchanged directly among the nodes (DirectExchange): each
// node sends its local reduction to the others — a worker to node 0, which
// forwards it to the other workers — and finishes the allreduce itself once it
// holds every node's. No plan, no ring.
#include "common/log.h"
#include "service/negotiation/inline_allreduce.h"
#include "service/negotiation/negotiator.h"

namespace ringsync::service::negotiation {

void Negotiator::announce() {
  while (formed_ && !unannounced_.empty()) {
    // Frames are bounded: a long list goes as several.
    peer_wire::Contributions message{epoch_, job_.node_rank, {}};
    std::size_t bytes = 0;
    std::size_t taken = 0;
    for (; taken < unannounced_.size(); ++taken) {
      const auto& t = unannounced_[taken];
      bytes += 2 * t.tensor.name.size() + 48 + t.data.size();
      if (taken > 0 && bytes > negotiation::Coordinator::kMaxPlanBytes) break;
    }
    message.tensors.assign(std::make_move_iterator(unannounced_.begin()),
                           std::make_move_iterator(unannounced_.begin() + static_cast<std::ptrdiff_t>(taken)));
    unannounced_.erase(unannounced_.begin(), unannounced_.begin() + static_cast<std::ptrdiff_t>(taken));
    for (const auto& t : message.tensors) in_negotiation_.insert(t.tensor.name);
    // Sent before this node's own part is applied, so the others do not wait
    // for its copy-out.
    if (job_.node_rank == 0) {
      for (std::uint32_t r = 1; r < job_.num_nodes; ++r) control_->send(r, message);
    } else {
      control_->send(0, message);
    }
    for (auto& t : message.tensors) {
      if (!formed_) return;
      on_contribution(job_.node_rank, std::move(t));
    }
  }
}

void Negotiator::on_contributions(std::uint32_t from, peer_wire::Contributions contributions) {
  const std::uint32_t origin = contributions.origin;
  // A worker speaks for itself; node 0 also forwards the other workers'.
  const bool valid = origin < job_.num_nodes && origin != job_.node_rank && (from == 0 || origin == from);
  if (!valid) {
    RS_LOG(warn, "ring") << node_name(from) << " sent contributions of node " << origin << "; ignored";
    metrics_.error(observe::ErrorKind::kPeerProtocol);
    return;
  }
  if (job_.node_rank == 0)
    for (std::uint32_t r = 1; r < job_.num_nodes; ++r)
      if (r != origin) control_->send(r, contributions);
  for (auto& t : contributions.tensors) {
    if (!formed_) return;
    on_contribution(origin, std::move(t));
  }
}

void Negotiator::on_contribution(std::uint32_t origin, peer_wire::DirectTensor contribution) {
  if (!direct_) return;
  const std::string name = contribution.tensor.name;
  auto round = direct_->add(origin, std::move(contribution), Clock::now());
  if (round) return finish_round(std::move(*round));
  check_paths(name);
}

void Negotiator::finish_round(negotiation::DirectExchange::Round round) {
  using Outcome = negotiation::DirectExchange::Round::Outcome;
  if (round.outcome == Outcome::kNegotiate) {
    // Every node got here for this round: node 0 plans it (on the ring).
    auto it = waiting_.find(round.name);
    if (it != waiting_.end() && !it->second.queue.empty()) {
      negotiate(it->second.queue.front(), /*with_data=*/false);
      return;
    }
  }
  auto taken = take_front(round.name);
  if (!taken) {
    // After a break the tensors of unfinished rounds have failed already.
    if (broken_ || holding_) return;
    // This node's own contribution is part of every round: a bug if reached.
    lose(Status::Internal("a direct exchange of tensor '" + round.name + "' finished with nothing ready on " +
                          node_name(job_.node_rank)));
    return;
  }
  const Clock::time_point now = Clock::now();
  negotiated(round.name, taken->second, now);
  if (round.outcome == Outcome::kMismatch) {
    const std::string message = with_rank_hint(round.error);
    RS_LOG(warn, "collective") << message;
    answers_.fail(taken->first, Status::Mismatch(message), observe::ErrorKind::kMismatch);
    return;
  }
  peer_wire::Operation op;
  op.kind = round.tensor.kind;
  op.dtype = round.tensor.dtype;
  op.op = round.tensor.op;
  op.names = {round.name};
  op.counts = {round.tensor.count};
  op.result = std::move(round.result);
  std::vector<local::PendingCollective> tensors;
  tensors.push_back(std::move(taken->first));
  complete_inline(op, std::move(tensors), {taken->second}, "direct");
}

}  // namespace ringsync::service::negotiation
