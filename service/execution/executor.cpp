// Running planned operations (executor.h).
#include "service/execution/executor.h"

#include <boost/asio/post.hpp>
#include <utility>

#include "common/log.h"
#include "service/execution/gather_gate.h"
#include "service/execution/operation_schedule.h"
#include "service/execution/staged_allreduce.h"
#include "service/collective/kind.h"
#include "service/collective/node_operation.h"
#include "service/device/staging.h"
#include "service/integrity/checked_result.h"
#include "service/integrity/linear_sum.h"
#include "service/integrity/test_corruption.h"
#include "service/observe/timeline.h"

namespace ringsync::service::execution {

namespace asio = boost::asio;

namespace {

Status kShutDown() { return Status::Closed("ringsyncd shut down during the collective"); }

// A data task that keeps its gate alive as long as itself (the task holds a
// plain pointer to it).
class GatedTask final : public ring::Task {
 public:
  GatedTask(std::unique_ptr<ring::Task> inner, std::shared_ptr<GatherGate> gate)
      : gate_(std::move(gate)), inner_(std::move(inner)) {}
  Status post() override { return inner_->post(); }
  ring::TaskState progress() override { return inner_->progress(); }
  void abort(const Status& why) override { inner_->abort(why); }
  const Status& status() const override { return inner_->status(); }

 private:
  std::shared_ptr<GatherGate> gate_;
  std::unique_ptr<ring::Task> inner_;  // declared last, destroyed first: it may read the gate to the end
};

// A data task over a transport that records every message it posts and
// completes (transport/watched.h): what the progress deadline and the
// in-flight view read.
class WatchedTask final : public ring::Task {
 public:
  WatchedTask(transport::Transport& transport, std::shared_ptr<transport::OperationWatch> watch,
              const RingEngine::MakeTask& make)
      : wire_(std::make_unique<transport::WatchedTransport>(transport, std::move(watch))), inner_(make(*wire_)) {}
  Status post() override { return inner_->post(); }
  ring::TaskState progress() override { return inner_->progress(); }
  void abort(const Status& why) override { inner_->abort(why); }
  const Status& status() const override { return inner_->status(); }

 private:
  std::unique_ptr<transport::WatchedTransport> wire_;  // declared first, destroyed last: the task posts through it
  std::unique_ptr<ring::Task> inner_;
};

}  // namespace

Executor::Executor(asio::io_context& io, const cluster::JobSpec& job, const cluster::ClusterConfig& settings, threads::WorkPool& pool,
                   observe::DaemonMetrics& metrics, observe::Timeline* timeline, cluster::Answers& answers, Hooks hooks)
    : io_(io),
      job_(job),
      settings_(settings),
      pool_(pool),
      metrics_(metrics),
      timeline_(timeline),
      answers_(answers),
      hooks_(std::move(hooks)),
      ring_buffers_(collective::RingBufferPool::create(settings.fusion_threshold_bytes)),
      corrupt_results_(integrity::corrupt_result_node() == job.node_rank && job.num_nodes > 1) {
  if (corrupt_results_)
    RS_LOG(warn, "ring") << integrity::kCorruptResultEnv << " is set: job '" << job.id << "' node "
                         << job.node_rank << " corrupts its results on purpose (a test hook; never set it "
                         << "outside tests)";
}

Executor::~Executor() = default;

void Executor::formed(std::uint64_t epoch, RingEngine* engine, std::vector<std::string> lanes) {
  formed_ = true;
  epoch_ = epoch;
  engine_ = engine;
  lanes_ = std::move(lanes);
  if (settings_.ring.verify_results != integrity::VerifyResults::kOff)
    metrics_.integrity_failures.with({job_.id}).inc(0);  // the series exists from the first ring on
}

void Executor::lost(const Status& why) {
  if (!formed_) return;
  formed_ = false;
  engine_ = nullptr;
  last_loss_ = why;
  active_.clear();
  auto queued = std::move(queued_);
  queued_.clear();
  for (auto& r : queued)
    for (auto& t : r->planned->tensors) answers_.fail(t, why, cluster::lost_kind(why));
  for (auto& r : std::exchange(held_, {})) complete(r, why);
}

void Executor::submit(std::shared_ptr<cluster::PlannedOperation> operation) {
  auto running = std::make_shared<Running>();
  running->planned = std::move(operation);
  queued_.push_back(std::move(running));
  start_operations();
}

void Executor::start_operations() {
  while (in_flight_ < kMaxInFlight && !queued_.empty()) {
    auto running = std::move(queued_.front());
    queued_.pop_front();
    begin(std::move(running));
  }
}

void Executor::begin(std::shared_ptr<Running> running) {
  const peer_wire::Operation& op = running->planned->op;
  running->started = Clock::now();
  running->phase_since = running->started;
  metrics_.ring_operations.with({wire::collective_kind_name(op.kind)}).inc();
  metrics_.fused_tensors.with().inc(static_cast<double>(op.names.size()));
  running->route = choose_route(*running->planned);
  if (running->route.path == route::Path::kPlanOnly) return complete(std::move(running), Status::Ok());
  running->counted = true;
  ++in_flight_;
  running->epoch = epoch_;
  active_[op.sequence] = running;
  // The operation on this node, top to bottom (each step after the one before
  // it succeeded; the first failure completes the operation).
  using Done = OperationSchedule::Done;
  auto schedule = OperationSchedule::create();
  if (running->route.path == route::Path::kStagedRing) {
    // One GPU allreduce staged chunk by chunk: its copies to and from the
    // device overlap the ring; no gather, no scatter.
    schedule->then([this, running](Done done) { run_staged(running, std::move(done)); })
        .then([this, running](Done done) { stage_out(running, std::move(done)); });  // to the other local GPUs
  } else {
    schedule->then([this, running](Done done) { fill_staged(running, std::move(done)); })  // GPU inputs to host
        .then([this, running](Done done) { gather_and_ring(running, std::move(done)); })  // local ranks in, between the nodes
        .then([this, running](Done done) { scatter(running, std::move(done)); })  // the result to every local rank
        .then([this, running](Done done) { stage_out(running, std::move(done)); });  // GPU results to the GPUs
  }
  schedule->start([this, running](const Status& status, observe::ErrorKind error_kind) {
    complete(running, status, error_kind);
  });
}

route::Route Executor::choose_route(const cluster::PlannedOperation& planned) const {
  const peer_wire::Operation& op = planned.op;
  std::vector<std::size_t> counts(op.counts.begin(), op.counts.end());
  const collective::RingBuffer ring = collective::kind_of(op.kind).ring_buffer(shape_of(op), counts);
  route::Query query;
  query.kind = op.kind;
  query.bytes = ring.count * dtype_size(op.dtype);
  query.alone = false;
  query.nodes = job_.num_nodes;
  query.staged_chunk_by_chunk =
      planned.tensors.size() == 1 && planned.tensors[0].staging && planned.tensors[0].staging->pipelined();
  return route::choose(route::Stage::kRunning, query, {settings_.ring.inline_bytes, settings_.ring.routes});
}

collective::OperationShape Executor::shape_of(const peer_wire::Operation& op) const {
  return {op.kind, op.dtype, op.op, op.root, job_.node_rank, job_.num_nodes, job_.slots};
}

void Executor::on_pool(std::size_t pieces, std::function<void(std::size_t)> piece,
                       std::function<void(const Status&)> then) {
  pool_.run(pieces, std::move(piece),
            // Runs on a pool thread, possibly while the daemon is being torn
            // down: it touches only the io_context; the posted step runs on the
            // control thread, where the job's ring keeps this executor until
            // nothing of it is left in the pool (JobRing::done()).
            [this, &io = io_, then = std::move(then)] {
              asio::post(io, [this, then] { then(pool_.cancelled() ? kShutDown() : Status::Ok()); });
            });
}

void Executor::record(const Running& running, std::string_view phase, Clock::time_point start) const {
  if (!timeline_) return;
  const Clock::time_point now = Clock::now();
  for (const auto& name : running.planned->op.names) timeline_->phase(name, phase, start, now);
}

void Executor::fill_staged(std::shared_ptr<Running> running, OperationSchedule::Done done) {
  enter(*running, Phase::kStageIn);
  std::vector<std::shared_ptr<device::DeviceStaging>> unfilled;
  for (const auto& t : running->planned->tensors)
    if (t.staging && t.staging->pipelined()) unfilled.push_back(t.staging);
  if (unfilled.empty()) return done(Status::Ok(), observe::ErrorKind::kFromStatus);
  auto failures = std::make_shared<std::vector<Status>>(unfilled.size());
  on_pool(
      unfilled.size(), [unfilled, failures](std::size_t i) { (*failures)[i] = unfilled[i]->fill_host(); },
      [failures, done = std::move(done)](const Status& status) {
        for (const Status& failed : *failures)
          if (!failed.ok()) return done(failed, observe::ErrorKind::kFromStatus);
        done(status, observe::ErrorKind::kFromStatus);
      });
}

void Executor::gather_and_ring(std::shared_ptr<Running> running, OperationSchedule::Done done) {
  make_work(*running);
  if (ring_before_gather(running)) {
    // One local input: the ring reads it where it lies, and there is nothing to gather.
    if (const std::byte* input = running->work->ring_input())
      return run_ring(running, std::move(done), nullptr, nullptr, input);
    if (auto gate = gather_gate(running)) return gather_under_ring(running, std::move(gate), std::move(done));
  }
  gather(running, [this, running, done](const Status& status, observe::ErrorKind error_kind) {
    if (!status.ok()) return done(status, error_kind);
    run_ring(running, done);
  });
}

bool Executor::ring_before_gather(const std::shared_ptr<Running>& running) const {
  const peer_wire::Operation& op = running->planned->op;
  const collective::NodeOperation& work = *running->work;
  // The result check's linear sum reads the whole buffer when the ring starts.
  if (!collective::kind_of(op.kind).ring_reads_while_gathering() || running->route.path != route::Path::kRing ||
      job_.num_nodes < 2 || ring_gone(running) || checks_linear_sum(op) ||
      work.buffer_bytes() <= route::kInlineWorkBytes)
    return false;
  for (const auto& t : running->planned->tensors)
    if (t.staging) return false;  // GPU tensors: their host buffers are filled first (fill_staged)
  return true;
}

std::shared_ptr<GatherGate> Executor::gather_gate(const std::shared_ptr<Running>& running) {
  const collective::NodeOperation& work = *running->work;
  std::vector<GatherGate::Span> spans;
  for (std::size_t i = 0; i < work.gather_pieces(); ++i) {
    const collective::NodeOperation::Span span = work.gather_span(i);
    spans.push_back({span.begin, span.bytes});
  }
  auto gate = std::make_shared<GatherGate>(running->work->buffer(), std::move(spans), engine_->waker());
  return gate->valid() ? gate : nullptr;  // pieces that overlap: gather first
}

bool Executor::checks_linear_sum(const peer_wire::Operation& op) const {
  return wire::reduces_to_all(op.kind) && settings_.ring.verify_results == integrity::VerifyResults::kAll &&
         integrity::linear_applies(op.dtype, op.op);
}

void Executor::gather_under_ring(std::shared_ptr<Running> running, std::shared_ptr<GatherGate> gate,
                                 OperationSchedule::Done done) {
  auto work = running->work;
  metrics_.gathered_bytes.with().inc(static_cast<double>(work->gather_bytes()));
  auto order = std::make_shared<const std::vector<std::size_t>>(
      gate->ring_order(work->buffer_bytes(), dtype_size(work->shape().dtype), job_.num_nodes, job_.node_rank));
  auto join = std::make_shared<GatherJoin>();
  on_pool(
      order->size(),
      [work, gate, order](std::size_t k) {
        work->gather_piece((*order)[k]);
        gate->mark((*order)[k]);
      },
      [this, running, join](const Status&) {
        join->gathered = true;
        record(*running, "LOCAL_REDUCE", running->started);
        if (join->after) std::exchange(join->after, nullptr)();
      });
  run_ring(running, std::move(done), std::move(gate), std::move(join));
}

void Executor::make_work(Running& running) {
  const peer_wire::Operation& op = running.planned->op;
  std::vector<std::size_t> counts(op.counts.begin(), op.counts.end());
  std::vector<std::vector<collective::Contribution>> tensors;
  for (const auto& t : running.planned->tensors) {
    std::vector<collective::Contribution> ranks;
    for (const auto& s : t.submissions) ranks.push_back(s.where);
    tensors.push_back(std::move(ranks));
  }
  running.work = std::make_shared<collective::NodeOperation>(shape_of(op), std::move(counts), std::move(tensors),
                                                             settings_.ring.chunk_bytes, ring_buffers_.get());
}

void Executor::gather(std::shared_ptr<Running> running, OperationSchedule::Done done) {
  enter(*running, Phase::kGather);
  auto work = running->work;
  metrics_.gathered_bytes.with().inc(static_cast<double>(work->gather_bytes()));
  if (work->buffer_bytes() <= route::kInlineWorkBytes) {
    for (std::size_t i = 0; i < work->gather_pieces(); ++i) work->gather_piece(i);
    return done(Status::Ok(), observe::ErrorKind::kFromStatus);
  }
  on_pool(
      work->gather_pieces(), [work](std::size_t i) { work->gather_piece(i); },
      [done = std::move(done)](const Status& status) { done(status, observe::ErrorKind::kFromStatus); });
}

std::optional<Status> Executor::ring_gone(const std::shared_ptr<Running>& running) const {
  if (formed_ && engine_ && running->epoch == epoch_) return std::nullopt;
  return last_loss_.ok() ? Status::PeerLost("the ring was lost before the operation ran") : last_loss_;
}

ring::RingOptions Executor::ring_options(const peer_wire::Operation& op) const {
  ring::RingOptions options;
  options.sequence = op.sequence;
  options.chunk_bytes = settings_.ring.chunk_bytes;
  options.window = settings_.ring_window;
  return options;
}

void Executor::ring_done(const std::shared_ptr<Running>& running, const Status& status,
                         const OperationSchedule::Done& done) {
  if (status.ok()) return done(status, observe::ErrorKind::kFromStatus);
  if (formed_ && running->epoch == epoch_) {
    running->failed = true;
    held_.push_back(running);  // lost() completes it; the schedule ends here
    hooks_.suspect(status);
    return;
  }
  // Aborted by the loss: every rank gets the loss's own words.
  done(last_loss_.ok() ? status : last_loss_, observe::ErrorKind::kFromStatus);
}

RingEngine::MakeTask Executor::data_task(const std::shared_ptr<Running>& running, std::shared_ptr<GatherGate> gate,
                                         const std::byte* input) const {
  const peer_wire::Operation& op = running->planned->op;
  ring::RingOptions options = ring_options(op);
  options.gate = gate.get();
  options.input = input;
  const std::size_t ranks = static_cast<std::size_t>(job_.num_nodes) * job_.slots;
  const std::uint32_t root_node = op.root / std::max<std::uint32_t>(1, job_.slots);
  std::vector<std::string> names = timeline_ ? op.names : std::vector<std::string>{};
  return [kind = &collective::kind_of(op.kind), work = running->work, path = running->route.path, options, ranks,
          root_node, timeline = timeline_, names = std::move(names),
          gate = std::move(gate)](transport::Transport& t) -> std::unique_ptr<ring::Task> {
    auto task = kind->task({t, *work, path, options, ranks, root_node, timeline, &names});
    if (gate) task = std::make_unique<GatedTask>(std::move(task), gate);
    return task;
  };
}

void Executor::run_ring(std::shared_ptr<Running> running, OperationSchedule::Done done,
                        std::shared_ptr<GatherGate> gate, std::shared_ptr<GatherJoin> join,
                        const std::byte* input) {
  // With the gather beside it, nothing is reported before the pool stopped
  // writing the buffer (it may be a rank's output). A failed ring's suspicion
  // of its peers (ring_done) waits for that too: at most one gather's time.
  auto report = [join](std::function<void()> step) {
    if (join && !join->gathered) {
      join->after = std::move(step);
      return;
    }
    step();
  };
  if (pool_.cancelled()) return report([done] { done(kShutDown(), observe::ErrorKind::kFromStatus); });
  if (!join && input == nullptr) record(*running, "LOCAL_REDUCE", running->started);  // with an input nothing was gathered
  if (auto gone = ring_gone(running)) return report([done, why = *gone] { done(why, observe::ErrorKind::kFromStatus); });
  const peer_wire::Operation& op = running->planned->op;
  const route::Path path = running->route.path;
  metrics_.data_operations.with({route::path_name(path)}).inc();
  enter(*running, Phase::kDataPlane);
  running->algorithm = route::path_name(path);
  const Clock::time_point ring_start = Clock::now();

  // The kind's task on the route's path (service/collective/), then the
  // result check when it is on (service/integrity/checked_result.h), every
  // message of both recorded for the progress deadline and the in-flight view.
  RingEngine::MakeTask make = data_task(running, std::move(gate), input);
  std::shared_ptr<integrity::CheckOutcome> check;
  if (settings_.ring.verify_results != integrity::VerifyResults::kOff && wire::traits(op.kind).shared_result &&
      job_.num_nodes > 1) {
    check = std::make_shared<integrity::CheckOutcome>();
    integrity::CheckSpec spec{settings_.ring.verify_results, describe(op), corrupt_results_};
    // Whole results of integer sums: their inputs' linear sums are checked too.
    spec.linear = checks_linear_sum(op);
    spec.dtype = op.dtype;
    make = [data = std::move(make), work = running->work, options = ring_options(op), spec,
            check](transport::Transport& t) {
      return std::make_unique<integrity::CheckedResult>(t, data(t), work->buffer(), work->buffer_bytes(), options,
                                                        spec, check);
    };
  }
  running->watch = std::make_shared<transport::OperationWatch>(running->phase_since);
  make = [inner = std::move(make), watch = running->watch](transport::Transport& t) -> std::unique_ptr<ring::Task> {
    return std::make_unique<WatchedTask>(t, watch, inner);
  };

  // A task that records its own phases (the ring allreduce's two halves) has
  // none here; every other is one phase, from the hand-off to the ring's thread to its end.
  const char* phase = collective::kind_of(op.kind).data_phase(path);
  engine_->run(std::move(make), [this, running, ring_start, check, phase, report,
                                 done = std::move(done)](const Status& status) {
    if (phase) record(*running, phase, ring_start);
    report([this, running, check, status, done] {
      if (check && check->mismatch) {
        // Every node compared the same words and fails alike: the ring itself is fine.
        RS_LOG(error, "ring") << "job '" << job_.id << "': " << status.message();
        metrics_.integrity_failures.with({job_.id}).inc();
        return done(status, observe::ErrorKind::kIntegrity);
      }
      ring_done(running, status, done);
    });
  });
}

void Executor::run_staged(std::shared_ptr<Running> running, OperationSchedule::Done done) {
  if (auto gone = ring_gone(running)) return done(*gone, observe::ErrorKind::kFromStatus);
  const peer_wire::Operation& op = running->planned->op;
  const ring::RingOptions options = ring_options(op);
  const std::size_t divisor = static_cast<std::size_t>(job_.num_nodes) * job_.slots;
  std::shared_ptr<device::DeviceStaging> staging = running->planned->tensors[0].staging;
  const std::size_t count = op.counts.empty() ? 0 : static_cast<std::size_t>(op.counts[0]);
  // One staging copy holds several ring chunks: the copy engine's cost per copy
  // is paid rarely (--gpu-staging-chunk; docs/gpu.md).
  const std::size_t copy_bytes = staging->pipeline_chunk();
  std::function<void()> wake = engine_->waker();
  const Clock::time_point ring_start = Clock::now();
  enter(*running, Phase::kDataPlane);
  running->algorithm = route::path_name(route::Path::kStagedRing);
  running->watch = std::make_shared<transport::OperationWatch>(running->phase_since);
  RingEngine::MakeTask make_staged = [staging, options, divisor, count, dtype = op.dtype, reduction = op.op, copy_bytes,
                               wake](transport::Transport& t) -> std::unique_ptr<ring::Task> {
    staging->copier().set_wakeup(wake);  // copies finish off the transport: they must wake the engine
    return std::make_unique<StagedAllreduce>(t, staging->copier(), staging->staged_buffers(), count, dtype,
                                             reduction, divisor, options, copy_bytes, staging);
  };
  RingEngine::MakeTask make = [inner = std::move(make_staged), watch = running->watch](transport::Transport& t)
      -> std::unique_ptr<ring::Task> { return std::make_unique<WatchedTask>(t, watch, inner); };
  engine_->run(std::move(make), [this, running, staging, ring_start, done = std::move(done)](const Status& status) {
    record(*running, "STAGED_ALLREDUCE", ring_start);
    if (status.ok()) staging->result_on_device();
    ring_done(running, status, done);
  });
}

void Executor::scatter(std::shared_ptr<Running> running, OperationSchedule::Done done) {
  enter(*running, Phase::kCopyOut);
  auto work = running->work;
  const Clock::time_point start = Clock::now();
  if (work->buffer_bytes() <= route::kInlineWorkBytes) {
    for (std::size_t i = 0; i < work->scatter_pieces(); ++i) work->scatter_piece(i);
    record(*running, "COPY_OUT", start);
    return done(Status::Ok(), observe::ErrorKind::kFromStatus);
  }
  on_pool(
      work->scatter_pieces(), [work](std::size_t i) { work->scatter_piece(i); },
      [this, running, start, done = std::move(done)](const Status& status) {
        record(*running, "COPY_OUT", start);
        done(status, observe::ErrorKind::kFromStatus);
      });
}

void Executor::stage_out(std::shared_ptr<Running> running, OperationSchedule::Done done) {
  const auto& tensors = running->planned->tensors;
  std::vector<std::size_t> staged;
  for (std::size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].staging) staged.push_back(i);
  if (staged.empty()) return done(Status::Ok(), observe::ErrorKind::kFromStatus);
  enter(*running, Phase::kStageOut);
  running->copied_back.assign(tensors.size(), Status::Ok());
  const Clock::time_point start = Clock::now();
  on_pool(
      staged.size(),
      [running, staged](std::size_t k) {
        running->copied_back[staged[k]] = running->planned->tensors[staged[k]].staging->stage_out();
      },
      [this, running, start, done = std::move(done)](const Status& status) {
        if (timeline_)
          for (const auto& t : running->planned->tensors)
            if (t.staging) timeline_->phase(t.name, "STAGE_OUT", start, Clock::now());
        done(status, observe::ErrorKind::kFromStatus);
      });
}

void Executor::complete(std::shared_ptr<Running> running, const Status& status, observe::ErrorKind error_kind) {
  if (running->counted) --in_flight_;
  if (running->epoch == epoch_) active_.erase(running->planned->op.sequence);
  running->work.reset();
  const std::size_t ranks = static_cast<std::size_t>(job_.num_nodes) * job_.slots;
  for (std::size_t i = 0; i < running->planned->tensors.size(); ++i) {
    local::PendingCollective& tensor = running->planned->tensors[i];
    tensor.staging.reset();  // its host buffer is not needed any more
    if (status.ok() && i < running->copied_back.size() && !running->copied_back[i].ok()) {
      const Status& failed = running->copied_back[i];
      RS_LOG(warn, "device") << "tensor '" << tensor.name << "': copying the result back to the GPU failed: "
                             << failed.message();
      answers_.fail(tensor, failed, observe::ErrorKind::kDevice);
    } else if (status.ok()) {
      answers_.succeed(tensor, running->planned->ready_at[i], ranks);
    } else {
      answers_.fail(tensor, status, observe::resolve(error_kind, status));
    }
  }
  start_operations();
  if (idle() && hooks_.idle) hooks_.idle();
}

}  // namespace ringsync::service::execution
