// Negotiation: every node reports its locally ready tensors to node 0, which
// plans the ones ready everywhere; every node applies the same plans in the
// same order. Repeat tensors travel as response-cache bits.
#include <boost/asio/post.hpp>

#include <unordered_map>

#include "common/log.h"
#include "service/negotiation/inline_allreduce.h"
#include "service/negotiation/negotiator.h"
#include "service/observe/timeline.h"

namespace ringsync::service::negotiation {

namespace asio = boost::asio;

namespace {

peer_wire::ReadyTensor describe(const local::PendingCollective& p) {
  const wire::Collective& c = p.submissions.front().request;
  return peer_wire::ReadyTensor{p.name, c.kind, c.dtype, c.op, c.count, c.root};
}

// What the route knows of a tensor ready on this node of the job's ring.
route::Query query_of(const local::PendingCollective& p, std::uint32_t nodes) {
  const wire::Collective& c = p.submissions.front().request;
  route::Query q;
  q.kind = c.kind;
  q.bytes = c.count * dtype_size(c.dtype);
  q.alone = false;
  q.nodes = nodes;
  q.device = c.memory == wire::Memory::kDevice || p.staging != nullptr;
  return q;
}

}  // namespace

Negotiator::Negotiator(asio::io_context& io, const cluster::JobSpec& job, const cluster::ClusterConfig& settings,
                       observe::DaemonMetrics& metrics, observe::Timeline* timeline, cluster::Answers& answers, Hooks hooks)
    : io_(io),
      job_(job),
      settings_(settings),
      metrics_(metrics),
      timeline_(timeline),
      answers_(answers),
      hooks_(std::move(hooks)),
      report_timer_(io) {}

Negotiator::~Negotiator() = default;

std::string Negotiator::node_name(std::uint32_t node) const { return cluster::node_name(job_, node); }

void Negotiator::formed(std::uint64_t epoch, cluster::ControlPlane* control) {
  formed_ = true;
  broken_.reset();
  holding_ = false;
  epoch_ = epoch;
  control_ = control;
  plans_applied_ = 0;
  next_cycle_ = 1;
  plan_scheduled_ = false;
  cache_.reset();
  if (settings_.ring.response_cache > 0)
    cache_ = std::make_unique<negotiation::ResponseCache>(settings_.ring.response_cache);
  bit_history_ = std::make_unique<negotiation::BitHistory>(settings_.ring.response_cache);
  stall_reported_.clear();
  disagreement_reported_.clear();
  direct_ = std::make_unique<negotiation::DirectExchange>(job_.num_nodes, job_.ranks());
  coordinator_.reset();
  if (job_.node_rank == 0)
    coordinator_ = std::make_unique<negotiation::Coordinator>(
        job_.num_nodes, settings_.fusion_threshold_bytes,
        negotiation::InlineOptions{settings_.ring.inline_bytes, job_.ranks()});
  // Whatever became ready while the ring formed is reported now.
  unreported_.clear();
  unannounced_.clear();
  in_negotiation_.clear();
  for (auto& [name, w] : waiting_)
    if (!w.queue.empty()) report(w.queue.front());
}

void Negotiator::lost(const Status& why, observe::ErrorKind kind, bool keep_held) {
  remember_paths();
  formed_ = false;
  control_ = nullptr;
  coordinator_.reset();
  direct_.reset();
  plan_scheduled_ = false;
  report_timer_.cancel();
  report_scheduled_ = false;
  unreported_.clear();
  unannounced_.clear();
  in_negotiation_.clear();
  // Held tensors were never reported: the next ring takes them.
  if (keep_held && holding_) return;
  broken_.reset();
  holding_ = false;
  auto waiting = std::move(waiting_);
  waiting_.clear();
  for (auto& [name, w] : waiting)
    for (auto& p : w.queue) answers_.fail(p, why, kind);
}

void Negotiator::break_run(const Status& why) {
  if (broken_) return;
  broken_ = why;
  holding_ = false;
  remember_paths();
  coordinator_.reset();  // node 0 plans nothing more on this ring
  plan_scheduled_ = false;
  unreported_.clear();
  unannounced_.clear();
  in_negotiation_.clear();
  auto waiting = std::move(waiting_);
  waiting_.clear();
  for (auto& [name, w] : waiting)
    for (auto& p : w.queue) answers_.fail(p, why, observe::ErrorKind::kPeerLost);
}

void Negotiator::hold() {
  broken_.reset();
  holding_ = true;
}

void Negotiator::lose(const Status& why) {
  if (formed_) hooks_.lose(why);
}

bool Negotiator::on_message(std::uint32_t from, peer_wire::Message& message) {
  if (auto* ready = std::get_if<peer_wire::ReadyList>(&message)) {
    if (job_.node_rank != 0) {
      RS_LOG(warn, "ring") << node_name(from) << " sent a ready list to a node that does not coordinate";
      metrics_.error(observe::ErrorKind::kPeerProtocol);
    } else {
      on_ready_list(from, std::move(*ready));
    }
    return true;
  }
  if (auto* contributions = std::get_if<peer_wire::Contributions>(&message)) {
    on_contributions(from, std::move(*contributions));
    return true;
  }
  if (auto* plan = std::get_if<peer_wire::Plan>(&message)) {
    if (from != 0) {
      RS_LOG(warn, "ring") << node_name(from) << " sent a plan but only node 0 plans";
      metrics_.error(observe::ErrorKind::kPeerProtocol);
    } else {
      on_plan(*plan);
    }
    return true;
  }
  return false;
}

std::optional<Status> Negotiator::expired(Clock::time_point now, Clock::duration timeout) const {
  for (const auto& [name, w] : waiting_) {
    if (w.ready_at.empty() || now - w.ready_at.front() < timeout) continue;
    return Status::Timeout(
        "tensor '" + name + "' of job '" + job_.id + "' timed out after " +
        std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now - w.ready_at.front()).count()) +
        " s on node " + std::to_string(job_.node_rank) +
        ": every local rank submitted it, but not every node did (--collective-timeout; node 0's log "
        "names the missing nodes)");
  }
  return std::nullopt;
}

void Negotiator::local_ready(local::PendingCollective collective) {
  if (broken_) {
    answers_.fail(collective, *broken_, observe::ErrorKind::kPeerLost);
    return;
  }
  Status agreed = local::check_agreement(collective);
  if (!agreed.ok()) {
    RS_LOG(warn, "collective") << agreed.message();
    answers_.fail(collective, agreed, observe::ErrorKind::kMismatch);
    return;
  }
  Waiting& w = waiting_[collective.name];
  w.queue.push_back(std::move(collective));
  w.ready_at.push_back(Clock::now());
  if (w.queue.size() == 1 && !holding_) report(w.queue.front());
}

void Negotiator::report(const local::PendingCollective& front) {
  const route::Query query = query_of(front, job_.num_nodes);
  const route::Limits limits{settings_.ring.inline_bytes, settings_.ring.routes};
  if (route::choose(route::Stage::kOnNode, query, limits).path != route::Path::kDirectExchange) {
    negotiate(front);
    return;
  }
  // Every node decides the same from the description; a node that cannot
  // give its local reduction (GPU buffers) still takes part, with no data.
  auto data = local_reduction(front, query.bytes);
  unannounced_.push_back({describe(front), data ? std::move(*data) : std::vector<std::uint8_t>{}});
  schedule_report();
}

void Negotiator::negotiate(const local::PendingCollective& front, bool with_data) {
  // Node 0 may answer a small allreduce with the plan (route: inline) when
  // every node sent its local reduction.
  const route::Query query = query_of(front, job_.num_nodes);
  const bool offer = with_data && route::offers_local_reduction(query, {settings_.ring.inline_bytes, settings_.ring.routes});
  unreported_.push_back({describe(front), offer ? local_reduction(front, query.bytes) : std::nullopt});
  schedule_report();
}

void Negotiator::schedule_report() {
  if (!formed_ || report_scheduled_) return;
  report_scheduled_ = true;
  // When this node is idle (nothing in negotiation, no ring operation queued
  // or running), report at once: a lone small allreduce pays no cycle.
  // Otherwise gather what becomes ready until the cycle ends and send it
  // together, so that a burst of small tensors fuses (Horovod's cycle).
  const bool idle = in_negotiation_.empty() && hooks_.executor_idle();
  const Clock::time_point due = last_report_ + settings_.cycle_time;
  if (settings_.cycle_time.count() == 0 || idle || Clock::now() >= due) {
    asio::post(io_, [this, alive = std::weak_ptr<int>(alive_)] {
      if (!alive.expired()) send_report();
    });
    return;
  }
  report_timer_.expires_at(due);
  report_timer_.async_wait([this](boost::system::error_code ec) {
    if (!ec) send_report();
  });
}

void Negotiator::send_report() {
  report_scheduled_ = false;
  if (!formed_) return;
  announce();
  if (!formed_ || unreported_.empty()) return;
  last_report_ = Clock::now();
  // Frames are bounded: a long list goes as several.
  std::vector<Unreported> rest;
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < unreported_.size(); ++i) {
    const Unreported& u = unreported_[i];
    bytes += 2 * u.tensor.name.size() + 32 + (u.data ? u.data->size() : 0);
    if (i > 0 && bytes > negotiation::Coordinator::kMaxPlanBytes) {
      rest.assign(std::make_move_iterator(unreported_.begin() + static_cast<std::ptrdiff_t>(i)),
                  std::make_move_iterator(unreported_.end()));
      unreported_.resize(i);
      break;
    }
  }
  peer_wire::ReadyList list;
  list.epoch = epoch_;
  list.node_rank = job_.node_rank;
  // Looked up now, so the bits refer to the cache as of plans_seen.
  std::vector<std::uint32_t> bits;
  for (auto& [tensor, data] : unreported_) {
    in_negotiation_.insert(tensor.name);
    if (data) list.data.push_back({tensor.name, std::move(*data)});
    const auto bit = cache_ ? cache_->lookup(tensor) : std::nullopt;
    if (bit) {
      bits.push_back(*bit);
      metrics_.cache_hits.with().inc();
    } else {
      list.tensors.push_back(std::move(tensor));
      metrics_.cache_misses.with().inc();
    }
  }
  unreported_.clear();
  list.cached = negotiation::to_bits(bits, cache_ ? cache_->capacity() : 0);
  list.plans_seen = plans_applied_;
  if (job_.node_rank == 0) {
    on_ready_list(0, std::move(list));
  } else if (control_) {
    control_->send(0, list);
  }
  if (!rest.empty() && formed_) {
    unreported_ = std::move(rest);
    send_report();
  }
}

std::optional<peer_wire::ReadyTensor> Negotiator::resolve_bit(std::uint32_t bit,
                                                               std::uint64_t plans_seen) {
  if (!bit_history_) return std::nullopt;
  return bit_history_->resolve(bit, plans_seen);
}

void Negotiator::record_in_cache(const peer_wire::ReadyTensor& tensor, std::uint64_t cycle) {
  if (!cache_) return;
  cache_->record(tensor);
  if (job_.node_rank != 0 || !bit_history_) return;
  if (const auto bit = cache_->lookup(tensor)) bit_history_->record(*bit, cycle, tensor);
}

void Negotiator::on_ready_list(std::uint32_t from, peer_wire::ReadyList list) {
  if (!coordinator_) return;
  std::vector<peer_wire::ReadyTensor> tensors = std::move(list.tensors);
  std::unordered_map<std::string, std::vector<std::uint8_t>> inline_data;
  for (auto& d : list.data) inline_data[d.name] = std::move(d.data);
  for (std::uint32_t bit : negotiation::from_bits(list.cached)) {
    auto tensor = resolve_bit(bit, list.plans_seen);
    if (!tensor) {
      // Only a node more than BitHistory::kDepth reassignments behind gets here.
      lose(Status::Internal(node_name(from) + " announced response-cache bit " + std::to_string(bit) +
                            " that the coordinator cannot resolve; forming the ring again"));
      return;
    }
    tensors.push_back(std::move(*tensor));
  }
  std::vector<std::vector<std::uint8_t>> data;
  if (!inline_data.empty()) {
    data.resize(tensors.size());
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      auto it = inline_data.find(tensors[i].name);
      if (it != inline_data.end()) data[i] = std::move(it->second);
    }
  }
  coordinator_->add_ready(from, tensors, Clock::now(), std::move(data));
  for (const auto& t : tensors) check_paths(t.name);
  schedule_plan();
}

void Negotiator::schedule_plan() {
  if (plan_scheduled_) return;
  plan_scheduled_ = true;
  // Every ready list that arrived in this turn of the loop goes into one plan.
  asio::post(io_, [this, alive = std::weak_ptr<int>(alive_), epoch = epoch_] {
    if (alive.expired() || epoch != epoch_) return;
    plan_scheduled_ = false;
    make_plan();
  });
}

void Negotiator::make_plan() {
  // Several plans when the ready tensors do not fit in one frame; each is a
  // cycle of its own (the response cache's bit history counts cycles).
  while (coordinator_ && formed_) {
    peer_wire::Plan plan = coordinator_->plan(epoch_, next_cycle_);
    if (plan.operations.empty() && plan.errors.empty()) return;
    ++next_cycle_;
    for (std::uint32_t r = 1; r < job_.num_nodes; ++r) control_->send(r, plan);
    on_plan(plan);
  }
}

std::optional<std::pair<local::PendingCollective, Clock::time_point>> Negotiator::take_front(const std::string& name) {
  auto it = waiting_.find(name);
  if (it == waiting_.end() || it->second.queue.empty()) return std::nullopt;
  Waiting& w = it->second;
  in_negotiation_.erase(name);
  std::pair<local::PendingCollective, Clock::time_point> out{std::move(w.queue.front()), w.ready_at.front()};
  w.queue.pop_front();
  w.ready_at.pop_front();
  if (w.queue.empty()) {
    waiting_.erase(it);
  } else {
    report(w.queue.front());
  }
  return out;
}

std::string Negotiator::with_rank_hint(const std::string& message) const {
  const std::string L = std::to_string(job_.slots);
  return message + " (node n runs global ranks " + L + "n to " + L + "n+" + std::to_string(job_.slots - 1) + ")";
}

void Negotiator::negotiated(const std::string& name, Clock::time_point ready, Clock::time_point now) {
  metrics_.negotiation.with().observe(std::chrono::duration<double>(now - ready).count());
  if (timeline_) timeline_->phase(name, "NEGOTIATE", ready, now);
}

void Negotiator::on_plan(const peer_wire::Plan& plan) {
  const Clock::time_point now = Clock::now();
  plans_applied_ = plan.cycle;
  for (const auto& error : plan.errors) {
    auto taken = take_front(error.name);
    if (!taken) continue;
    std::string message = with_rank_hint(error.message);
    RS_LOG(warn, "collective") << message;
    answers_.fail(taken->first, Status::Mismatch(message), observe::ErrorKind::kMismatch);
  }
  for (const auto& op : plan.operations) {
    if (!op.result.empty()) {
      std::vector<local::PendingCollective> tensors;
      std::vector<Clock::time_point> ready_at;
      for (const auto& name : op.names) {
        auto taken = take_front(name);
        if (!taken) {
          for (std::size_t i = 0; i < tensors.size(); ++i)
            answers_.fail(tensors[i], Status::PeerLost("the plan names a tensor not ready here"), observe::ErrorKind::kPeerLost);
          lose(Status::Internal("the plan names tensor '" + name + "' which is not ready on " +
                                node_name(job_.node_rank)));
          return;
        }
        negotiated(name, taken->second, now);
        record_in_cache(peer_wire::ReadyTensor{name, op.kind, op.dtype, op.op, op.counts[tensors.size()], op.root},
                        plan.cycle);
        tensors.push_back(std::move(taken->first));
        ready_at.push_back(taken->second);
      }
      complete_inline(op, std::move(tensors), std::move(ready_at), "plan");
      continue;
    }
    auto running = std::make_shared<cluster::PlannedOperation>();
    running->op = op;
    for (std::size_t i = 0; i < op.names.size(); ++i) {
      auto taken = take_front(op.names[i]);
      if (!taken) {
        const Status why = Status::Internal("the plan names tensor '" + op.names[i] +
                                            "' which is not ready on " + node_name(job_.node_rank));
        for (auto& t : running->tensors) answers_.fail(t, why, observe::ErrorKind::kPeerLost);
        lose(why);
        return;
      }
      negotiated(op.names[i], taken->second, now);
      peer_wire::ReadyTensor tensor{op.names[i], op.kind, op.dtype, op.op, op.counts[i], op.root};
      record_in_cache(tensor, plan.cycle);
      running->tensors.push_back(std::move(taken->first));
      running->ready_at.push_back(taken->second);
    }
    hooks_.run(std::move(running));
    if (!formed_) return;
  }
}

void Negotiator::complete_inline(const peer_wire::Operation& op, std::vector<local::PendingCollective> tensors,
                                  std::vector<Clock::time_point> ready_at, std::string_view path) {
  const Clock::time_point start = Clock::now();
  metrics_.ring_operations.with({wire::collective_kind_name(op.kind)}).inc();
  metrics_.fused_tensors.with().inc(static_cast<double>(op.names.size()));
  metrics_.inline_operations.with({std::string(path)}).inc();
  const std::size_t elem = dtype_size(op.dtype);
  std::uint64_t total = 0;
  for (auto c : op.counts) total += c;
  // Node 0 built the result from every node's data; a wrong size is a bug
  // there, and no rank gets a partial answer.
  Status status = total * elem == op.result.size()
                      ? Status::Ok()
                      : Status::Internal("the result of tensor(s) '" + op.names.front() + "' (" +
                                         std::string(path) + ") has " + std::to_string(op.result.size()) + " bytes, not " +
                                         std::to_string(total * elem));
  std::size_t offset = 0;
  for (std::size_t i = 0; i < tensors.size() && status.ok(); ++i) {
    const std::size_t bytes = static_cast<std::size_t>(op.counts[i]) * elem;
    status = copy_result(tensors[i], std::span(op.result).subspan(offset, bytes));
    offset += bytes;
  }
  if (timeline_)
    for (const auto& name : op.names) timeline_->phase(name, "COPY_OUT", start, Clock::now());
  const std::size_t ranks = static_cast<std::size_t>(job_.num_nodes) * job_.slots;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (status.ok()) {
      answers_.succeed(tensors[i], ready_at[i], ranks);
    } else {
      answers_.fail(tensors[i], status, observe::ErrorKind::kFromStatus);
    }
  }
  if (!status.ok()) {
    RS_LOG(error, "collective") << status.message();
    lose(status);
  }
}

}  // namespace ringsync::service::negotiation
