// Runs the planned operations of one job's ring on this node, in plan order,
// each as one schedule of steps (begin()): gather the local ranks' data into
// the ring buffer (WorkPool), run the ring (RingEngine; a ring allreduce starts
// while the gather still runs, gather_gate.h, or reads a node's one local input
// where it lies and gathers nothing), copy the result back
// to every local rank (WorkPool), copy GPU tensors' results back to their GPUs
// (WorkPool), answer them. A GPU allreduce staged chunk by chunk
// (DeviceStaging::pipelined()) runs instead as one StagedAllreduce over its own
// host buffer: no gather, no scatter; the copies to and from the GPU overlap the
// ring. A GPU tensor's stage-in comes before negotiation
// (DeviceService::stage_in): the plan is made of host data. A stage-out that
// fails fails its own tensor only, not the others fused with it. Up to
// kMaxInFlight operations overlap (tags keep their messages apart). With --verify-results the nodes compare their copies of a shared
// result after the ring (integrity/checked_result.h); copies that differ fail
// the operation on every node, and the ring stays up. Knows nothing of negotiation or of how the ring was formed: it is
// handed an engine when a ring forms and told when it is lost.
// Control thread only; the engine's and the pool's completions come back
// through the io_context.
#pragma once

#include <boost/asio/io_context.hpp>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string_view>

#include "common/status.h"
#include "service/cluster/answers.h"
#include "service/cluster/control_plane.h"
#include "service/cluster/job_spec.h"
#include "service/execution/operation_schedule.h"
#include "service/execution/ring_engine.h"
#include "service/collective/kind.h"
#include "service/collective/ring_buffer_pool.h"
#include "service/cluster/cluster_config.h"
#include "service/observe/daemon_metrics.h"
#include "service/route/route.h"
#include "service/threads/work_pool.h"
#include "service/transport/watched.h"

namespace ringsync::service::observe {
class Timeline;
}

namespace ringsync::service::execution {

class GatherGate;

class Executor {
 public:
  static constexpr std::size_t kMaxInFlight = 2;

  struct Hooks {
    // A ring operation failed on this node: the ring is over. The operation
    // waits for the verdict (lost()), which names the node to blame.
    std::function<void(const Status&)> suspect;
    // The last queued or running operation finished (idle() is now true).
    std::function<void()> idle;
  };

  // Every operation's tensors are answered through `answers`.
  Executor(boost::asio::io_context& io, const cluster::JobSpec& job, const cluster::ClusterConfig& settings, threads::WorkPool& pool,
           observe::DaemonMetrics& metrics, observe::Timeline* timeline, cluster::Answers& answers, Hooks hooks);
  ~Executor();

  // A ring formed: operations of this epoch run on `engine` (valid until lost()).
  // lanes[peer]: what carries the data-plane link to each node, for messages.
  void formed(std::uint64_t epoch, RingEngine* engine, std::vector<std::string> lanes = {});
  // The ring is gone: queued operations fail with `why` now; running ones fail
  // through their engine's callbacks.
  void lost(const Status& why);

  void submit(std::shared_ptr<cluster::PlannedOperation> operation);
  // Nothing queued and nothing running.
  bool idle() const { return in_flight_ == 0 && queued_.empty(); }

  // Deadlines of running operations (executor_deadlines.cpp; docs/cluster.md,
  // "Deadlines"). The first operation past one, and why: it started more than
  // `collective_timeout` ago; its data plane moved no bytes for
  // `progress_timeout`; or one of its local phases (GPU stage-in, gather,
  // copy-out, GPU stage-out) has run for `progress_timeout` (0: no progress
  // deadline). The reason names this node, the phase, and what it waits for.
  std::optional<Status> overdue(Clock::time_point now, Clock::duration collective_timeout,
                                Clock::duration progress_timeout) const;
  // Logs what each operation running for `after` (--stall-warning) waits
  // for, once per operation, and counts it (ringsync_stall_reports_total).
  // Returns how many run that long.
  std::size_t report_stalls(Clock::time_point now, Clock::duration after);

  // One running operation, as the daemon's in-flight view shows it.
  struct InFlight {
    std::uint32_t sequence = 0;
    std::string kind;
    std::vector<std::string> names;
    std::uint64_t bytes = 0;
    std::string phase;      // "GPU stage-in", "gather", "data plane", "copy-out", "GPU stage-out"
    std::string algorithm;  // of the data plane: "ring", "halving-doubling", "direct"
    double age_seconds = 0;    // since it started here
    double phase_seconds = 0;  // in this phase
    // The data plane's: bytes of completed messages, seconds since one last
    // completed, and the oldest message outstanding (with its peer's name and link).
    std::uint64_t bytes_moved = 0;
    double idle_seconds = 0;
    std::optional<transport::OperationWatch::Waiting> waiting;
    double waiting_seconds = 0;
    std::string peer;  // "node 1 (10.0.0.2:29517)"
    std::string link;  // "tcp/eth0"
    std::string summary;  // the whole of it in a sentence, as the log and errors say it
  };
  std::vector<InFlight> in_flight(Clock::time_point now) const;

 private:
  // Where a running operation is: which deadline applies, and what the
  // in-flight view shows.
  enum class Phase : std::uint8_t { kStageIn, kGather, kDataPlane, kCopyOut, kStageOut };
  struct Running {
    std::shared_ptr<cluster::PlannedOperation> planned;
    route::Route route;  // its path, chosen once (begin())
    bool counted = false;  // in in_flight_
    std::shared_ptr<collective::NodeOperation> work;
    std::uint64_t epoch = 0;  // the ring it was planned on
    Clock::time_point started;
    // By tensor, once stage_out ran: a GPU copy-back that failed (Ok otherwise).
    std::vector<Status> copied_back;
    Phase phase = Phase::kStageIn;
    Clock::time_point phase_since;
    const char* algorithm = "";  // the data plane's, once it started
    std::shared_ptr<transport::OperationWatch> watch;  // the data plane's messages
    bool stall_told = false;  // report_stalls() named it
    bool failed = false;      // its data task failed: it waits for the ring's verdict (held_)
  };
  static const char* phase_name(Phase phase);
  // "allreduce 'grad' (sequence 7)", "allreduce 'a' and 3 more fused (sequence 8)".
  static std::string describe(const peer_wire::Operation& op);
  void enter(Running& running, Phase phase);
  InFlight view(const Running& running, Clock::time_point now) const;

  void start_operations();
  // Chooses the operation's route, builds its schedule (operation_schedule.h)
  // and starts it; its steps below each report through `done`.
  void begin(std::shared_ptr<Running> running);
  route::Route choose_route(const cluster::PlannedOperation& planned) const;
  collective::OperationShape shape_of(const peer_wire::Operation& op) const;
  // Runs `pieces` on the pool, then `then` on the control thread (with the
  // shutdown's status when the pool was cancelled meanwhile).
  void on_pool(std::size_t pieces, std::function<void(std::size_t)> piece, std::function<void(const Status&)> then);
  // A timeline phase of every tensor of the operation, from `start` to now.
  void record(const Running& running, std::string_view phase, Clock::time_point start) const;
  // GPU tensors of a fused operation: their host buffers are filled first.
  void fill_staged(std::shared_ptr<Running> running, OperationSchedule::Done done);
  // The local ranks' data into the ring buffer, then the data task between the
  // nodes; a ring allreduce starts at once instead, over a GatherGate, and
  // reports once the gather is over too (gather_gate.h).
  void gather_and_ring(std::shared_ptr<Running> running, OperationSchedule::Done done);
  // The local ranks' data into the ring buffer (reduced, or placed).
  void gather(std::shared_ptr<Running> running, OperationSchedule::Done done);
  // Whole results of integer sums under --verify-results all: their inputs'
  // linear sums are checked too (integrity/checked_result.h).
  bool checks_linear_sum(const peer_wire::Operation& op) const;
  // The ring buffer and its pieces of work (NodeOperation).
  void make_work(Running& running);
  // A ring allreduce that can start before its gather is over: reading its
  // one local input where it lies (NodeOperation::ring_input()), or under a
  // GatherGate.
  bool ring_before_gather(const std::shared_ptr<Running>& running) const;
  // The gate such a ring can start under, or null (pieces that overlap).
  std::shared_ptr<GatherGate> gather_gate(const std::shared_ptr<Running>& running);
  // The gather on the pool, in the order the ring reads it, as the ring runs.
  void gather_under_ring(std::shared_ptr<Running> running, std::shared_ptr<GatherGate> gate,
                         OperationSchedule::Done done);
  // The gather running beside the ring: what the ring's completion waits for.
  struct GatherJoin {
    bool gathered = false;        // the pool's done() came back
    std::function<void()> after;  // the ring's report, held until then
  };
  // The kind's data task on the route's path (gate: it runs beside its
  // gather; input: it reads it instead of a gathered buffer).
  RingEngine::MakeTask data_task(const std::shared_ptr<Running>& running, std::shared_ptr<GatherGate> gate,
                                 const std::byte* input) const;
  // The data task between the nodes (ring, halving-doubling or direct), and the
  // result check; gate and join: its gather runs beside it (gather_under_ring);
  // input: a ring allreduce reads it instead of a gathered buffer (out of place).
  void run_ring(std::shared_ptr<Running> running, OperationSchedule::Done done,
                std::shared_ptr<GatherGate> gate = nullptr, std::shared_ptr<GatherJoin> join = nullptr,
                const std::byte* input = nullptr);
  // One GPU allreduce staged chunk by chunk as the ring runs.
  void run_staged(std::shared_ptr<Running> running, OperationSchedule::Done done);
  // The result back to every local rank.
  void scatter(std::shared_ptr<Running> running, OperationSchedule::Done done);
  // GPU tensors: the host result back to their local ranks' GPU outputs, each
  // on its own; a failure is that tensor's (Running::copied_back).
  void stage_out(std::shared_ptr<Running> running, OperationSchedule::Done done);
  // The ring the operation was planned on is gone: why.
  std::optional<Status> ring_gone(const std::shared_ptr<Running>& running) const;
  ring::RingOptions ring_options(const peer_wire::Operation& op) const;
  // A data task's outcome: success or the loss go on to `done`; a failure
  // while the ring stands is held for the verdict (lost() completes it).
  void ring_done(const std::shared_ptr<Running>& running, const Status& status, const OperationSchedule::Done& done);
  // error_kind: the ringsync_errors_total kind; "" derives it from the status.
  void complete(std::shared_ptr<Running> running, const Status& status,
                observe::ErrorKind error_kind = observe::ErrorKind::kFromStatus);

  boost::asio::io_context& io_;
  const cluster::JobSpec& job_;
  const cluster::ClusterConfig& settings_;
  threads::WorkPool& pool_;
  observe::DaemonMetrics& metrics_;
  observe::Timeline* timeline_;
  cluster::Answers& answers_;
  Hooks hooks_;
  // Ring buffers of fused and in-place operations, kept up to one fusion
  // buffer's worth between operations.
  std::shared_ptr<collective::RingBufferPool> ring_buffers_;
  // Test only: this node flips a bit of each checked result (integrity/test_corruption.h).
  const bool corrupt_results_;

  bool formed_ = false;
  std::uint64_t epoch_ = 0;
  RingEngine* engine_ = nullptr;
  Status last_loss_ = Status::Ok();
  std::deque<std::shared_ptr<Running>> queued_;
  std::vector<std::shared_ptr<Running>> held_;  // failed on the ring, waiting for lost()
  std::size_t in_flight_ = 0;
  std::map<std::uint32_t, std::shared_ptr<Running>> active_;  // by sequence: started ring operations
  std::vector<std::string> lanes_;  // by peer: what carries the link (formed())
};

}  // namespace ringsync::service::execution
