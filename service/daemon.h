// ringsyncd on one node: accepts trainers on a Unix socket, forms jobs from
// their hellos (any number at once, each isolated), matches their collectives
// by tensor name, runs the data movement on the work pool and answers each
// rank. A job of several nodes gets a JobRing of its own; the daemon's control
// port routes the other daemons to it. All state lives on one control thread
// (the io_context); bulk data never touches it.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/metrics.h"
#include "common/repeat_limiter.h"
#include "common/status.h"
#include "common/wire.h"
#include "service/cluster/answers.h"
#include "service/formation/control_listener.h"
#include "service/cluster/job_ring.h"
#include "service/daemon_config.h"
#include "service/local/job.h"
#include "service/local/job_description.h"
#include "service/local/kept_states.h"
#include "service/local/session.h"
#include "service/observe/daemon_metrics.h"
#include "service/observe/metrics_http.h"
#include "service/observe/timeline.h"
#include "service/rendezvous/served_store.h"
#include "service/threads/busy_poll.h"
#include "service/threads/work_pool.h"

namespace ringsync::service::device {
class DeviceService;
}

namespace ringsync::service {

class Daemon final : public local::SessionHost, private cluster::Answers {
 public:
  explicit Daemon(DaemonConfig config);
  ~Daemon();

  // Binds the socket and the metrics endpoint, writes the ready file.
  Status start();
  // Serves until SIGINT/SIGTERM or stop().
  void run();
  // Thread safe: asks the control thread to shut down.
  void stop();

  const DaemonConfig& config() const { return config_; }
  // local::SessionHost: what sessions hand up, and where they count.
  observe::DaemonMetrics& metrics() override { return metrics_; }
  RepeatLimiter& client_warnings() override { return client_warnings_; }
  std::string metrics_endpoint() const;
  // Why /readyz answers 503 ("" when ready): starting, shutting down, or the
  // pre-configured job's ring not formed.
  std::string not_ready();
  // GET /debug/inflight: what every operation of every job waits for here, as
  // JSON (daemon_inflight.cpp; docs/observability.md, "What is waiting").
  std::string in_flight_json();

  // Called by sessions on the control thread. A non-ok Status means the client
  // broke the protocol: the session sends it and closes.
  Status on_message(const std::shared_ptr<local::ClientSession>& session, wire::Message message) override;
  void on_disconnect(const std::shared_ptr<local::ClientSession>& session) override;

 private:
  // Connection lifecycle (daemon.cpp).
  Status listen();
  // --serve-rendezvous: the store this daemon serves itself (rendezvous/served_store.h).
  Status serve_rendezvous();
  void accept_next();
  void schedule_sweep();
  void sweep();
  void shutdown();
  Status write_ready_file() const;

  // Jobs (daemon_jobs.cpp).
  Status on_hello(const std::shared_ptr<local::ClientSession>& session, const wire::Hello& hello);
  // The job's ring for this hello: the one there is, or a new one; an error
  // refuses the hello.
  Result<cluster::JobRing*> ring_for(const local::DescribedJob& described);
  std::unique_ptr<cluster::JobRing> make_ring(cluster::JobSpec spec);
  // The hello reply: node rank and count, heartbeat interval, the channel.
  void answer_hello(const std::shared_ptr<local::ClientSession>& session, bool wants_channel, cluster::JobRing* ring);
  // A rendezvous job's registration ended: answer the hellos that waited.
  void on_registered(const std::string& job_id, const Status& outcome);
  // Where the other nodes reach this daemon's control port ("" when unknown).
  std::string advertised_address() const;
  // "rank 3 of job 'j' (node 1 at 10.0.0.2:29517, local rank 1, pid 42)".
  std::string rank_name(const local::ClientSession& session) const;
  void rank_left(const local::ClientSession& session, const Status& why, bool clean = false);
  void on_ring_lost(const std::string& job_id, const Status& why);
  // A job its trainers described: once no rank of it is here and its ring is
  // not formed (or closed), the ring goes.
  void maybe_release(const std::string& job_id);
  // Sessions whose process is stopped, or that stopped answering while they
  // waited, for --rank-liveness-timeout: their job fails.
  void check_liveness(Clock::time_point now);
  cluster::JobRing* ring_of(const std::string& job_id);
  void forget_ended_jobs(Clock::time_point now);

  // Requests (daemon_requests.cpp).
  void on_alloc(const std::shared_ptr<local::ClientSession>& session, const wire::AllocBuffer& alloc);
  void on_free(const std::shared_ptr<local::ClientSession>& session, const wire::FreeBuffer& free);
  void on_collective(const std::shared_ptr<local::ClientSession>& session, wire::Collective request);
  void on_keep_state(const std::shared_ptr<local::ClientSession>& session, const wire::KeepState& keep);
  void on_fetch_state(const std::shared_ptr<local::ClientSession>& session, const wire::FetchState& fetch);
  // `ring`: the job's ring on this node (null for a job of this node alone).
  Result<local::Submission> prepare(const std::shared_ptr<local::ClientSession>& session, const local::Job& job,
                             const cluster::JobRing* ring, wire::Collective request);
  // GPU buffers (service/device/service.h), created on first use.
  device::DeviceService& devices();

  // Running and answering collectives (daemon_collectives.cpp).
  void execute(local::PendingCollective collective);
  void observe_rank_wait(const local::PendingCollective& collective);
  void finish(local::PendingCollective& collective, const Status& status, Clock::time_point ready,
              std::size_t job_ranks = 0);
  Status start_cluster();
  // cluster::Answers: every rank of a collective answered, the outcome counted.
  void fail(local::PendingCollective& collective, const Status& status, observe::ErrorKind kind) override;
  void succeed(local::PendingCollective& collective, Clock::time_point ready, std::size_t ranks) override {
    finish(collective, Status::Ok(), ready, ranks);
  }
  void update_gauges();
  // The control loop's hooks for shared-memory channels (BusyPoll::Hooks).
  std::size_t poll_channels();
  bool channels_may_sleep();
  void channels_woke();

  DaemonConfig config_;
  boost::asio::io_context io_;
  boost::asio::local::stream_protocol::acceptor acceptor_;
  boost::asio::signal_set signals_;
  boost::asio::steady_timer sweep_timer_;
  std::uint64_t misuse_reported_ = 0;  // metrics::misuse_count() already logged
  RepeatLimiter client_warnings_;
  boost::asio::steady_timer accept_retry_;
  boost::asio::steady_timer shutdown_deadline_;
  metrics::Registry registry_;
  observe::DaemonMetrics metrics_;
  std::unique_ptr<observe::MetricsServer> metrics_server_;
  // --serve-rendezvous: the store, and the HTTP endpoint that serves it.
  std::unique_ptr<rendezvous::ServedStore> served_store_;
  std::unique_ptr<observe::MetricsServer> store_server_;
  threads::WorkPool pool_;
  threads::BusyPoll busy_;
  std::unique_ptr<observe::Timeline> timeline_;
  std::unique_ptr<formation::ControlListener> control_;  // --control-address (or node 0 of --hostfile)
  // Multi-node jobs by id, with how their first rank here described them
  // (none for the pre-configured job); rings of released jobs until their
  // last work is done.
  struct HostedRing {
    std::unique_ptr<cluster::JobRing> ring;
    std::optional<local::DescribedJob> described;
  };
  std::map<std::string, HostedRing> rings_;
  std::vector<std::unique_ptr<cluster::JobRing>> retiring_;
  // Hellos of rendezvous jobs waiting for this node's rank, by job.
  struct AwaitingRank {
    std::weak_ptr<local::ClientSession> session;
    bool wants_channel = false;
  };
  std::map<std::string, std::vector<AwaitingRank>> awaiting_rank_;
  // Jobs that ended here, and when their metrics go (--job-metrics-linger).
  std::map<std::string, Clock::time_point> forget_metrics_at_;
  local::KeptStates kept_;
  // Jobs whose run was lost here, and when: the next run's registration says how long recovery took.
  std::map<std::string, Clock::time_point> lost_at_;
  void job_gone(const std::string& job_id);
  std::shared_ptr<device::DeviceService> devices_;         // pool work holds no reference to it
  std::map<std::uint64_t, std::shared_ptr<local::ClientSession>> sessions_;
  std::vector<std::shared_ptr<local::ClientSession>> channels_;  // sessions with a shared-memory channel
  std::map<std::string, local::Job> jobs_;
  std::uint64_t next_session_id_ = 1;
  bool stopping_ = false;
  bool serving_ = false;  // accepting trainers: start() got through
  bool owns_socket_file_ = false;
};

}  // namespace ringsync::service
