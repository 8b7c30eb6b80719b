// One connection of a trainer to its ringsyncd: the handshake, the requests in
// flight (completed by whichever thread waits, progress.h), shared buffers,
// the bounce pool and the registered GPU allocations (context_device.cpp).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <variant>
#include <vector>

#include "client/src/buffers.h"
#include "client/src/collective_call.h"
#include "client/src/connection.h"
#include "client/src/device_memory.h"
#include "client/src/device_registry.h"
#include "client/src/env.h"
#include "client/src/placement.h"
#include "client/src/progress.h"
#include "client/src/requests.h"
#include "client/src/bounce_pool.h"
#include "common/status.h"

namespace ringsync::client {

class Context {
 public:
  // Collectives up to this many bytes (per rank) are answered within
  // microseconds: their waiting threads poll the full RINGSYNC_BUSY_POLL_US;
  // larger ones poll briefly, or their polling takes the CPU the daemon needs
  // to reduce and copy for them (docs/benchmarks-history.md, "Where an 8 B
  // allreduce spends its time (2026-12-03)").
  static constexpr std::uint64_t kSoonBytes = 8 * 1024;

  // Connects and says hello. The daemon's refusal
  // comes back as its status and message. `device` tells GPU pointers apart
  // (tests pass a fake one).
  static Result<std::unique_ptr<Context>> connect(
      const Settings& settings, std::shared_ptr<DeviceMemory> device = cuda_driver());

  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  // Closes the connection: pending requests complete with kClosed, shared and
  // bounce buffers are unmapped.
  ~Context();

  int local_rank() const { return settings_.local_rank; }
  int local_size() const { return settings_.local_size; }
  // Across the job: node_rank * local_size + local_rank, of num_nodes * local_size.
  int rank() const { return node_rank_ * settings_.local_size + settings_.local_rank; }
  int size() const { return num_nodes_ * settings_.local_size; }
  int node_rank() const { return node_rank_; }
  int num_nodes() const { return num_nodes_; }
  const std::string& daemon_version() const { return daemon_version_; }

  // A shared buffer of `bytes` (> 0) from the daemon, mapped here.
  Result<void*> alloc(std::size_t bytes);
  // Releases a buffer from alloc() that no pending request uses.
  Status free(void* ptr);

  // Committed state kept by the daemon (context_state.cpp): the first `bytes` of
  // the buffer from alloc() at `ptr` become this rank's state `name` on this node.
  Status keep_state(std::string_view name, const void* ptr, std::size_t bytes);
  // The state `name` kept for this local rank, in a new buffer (as from alloc());
  // {nullptr, 0} when none is kept.
  Result<std::pair<void*, std::size_t>> fetch_state(std::string_view name);
  // Nodes waiting to join the job's next run (elastic jobs with room; else 0).
  Result<std::uint32_t> nodes_waiting();

  // Validates, places (zero copy or bounced), copies in and sends one collective.
  // The returned state completes when the daemon answers or the connection ends.
  Result<std::shared_ptr<RequestState>> submit(const CollectiveCall& call);

  // Registers the GPU allocation holding [ptr, ptr + bytes) with the daemon now
  // (collectives register on first use otherwise). Ok when it is registered already.
  Status register_device(const void* ptr, std::size_t bytes);
  // Forgets the registration of the allocation holding ptr; the daemon unmaps it
  // once no collective uses it.
  Status unregister_device(const void* ptr);
  // Which device work a collective on GPU memory waits for before it is sent:
  // `stream`'s, or (nullptr) all of the buffer's context.
  void set_device_stream(void* stream) { device_stream_.store(stream); }

 private:
  struct IssuedBuffer {
    std::uint32_t buffer_id = 0;
    shm::Region memory;
  };
  struct PendingAlloc {
    std::size_t bytes = 0;
    bool fetch = false;  // a FetchState: buffer 0 (nothing kept) is an answer too
    bool done = false;
    std::optional<Result<IssuedBuffer>> result;
  };
  struct PendingRegistration {
    bool done = false;
    Status result;
    std::uint32_t value = 0;  // what a reply with a number says (NodesWaitingReply)
  };
  struct PendingCollective {
    std::shared_ptr<RequestState> state;
    Placement placement;
    std::optional<BounceBuffer> bounce;
    std::vector<std::uint32_t> pinned;         // shared buffers the request uses
    std::vector<std::uint32_t> device_pinned;  // GPU allocations it uses
  };
  using Pending = std::variant<PendingCollective, std::shared_ptr<PendingAlloc>,
                               std::shared_ptr<PendingRegistration>>;
  // A collective's GPU buffers, located (context_device.cpp).
  struct DeviceBuffers {
    std::optional<DeviceAllocation> send;  // absent when the send buffer is not read
    DeviceAllocation recv;
  };

  Context(Settings settings, std::unique_ptr<Connection> connection, std::string daemon_version,
          std::shared_ptr<DeviceMemory> device);

  Result<IssuedBuffer> allocate_buffer(std::size_t bytes);
  Result<BounceBuffer> acquire_bounce(std::size_t bytes);
  // Unpins the request's buffers and returns its bounce buffer to the pool.
  void release(PendingCollective& pending);
  // Registers the request and sends the collective (both memory paths).
  Result<std::shared_ptr<RequestState>> send_collective(wire::Collective message,
                                                        PendingCollective pending);

  // GPU buffers (context_device.cpp).
  // nullopt when the call's buffers are host memory; an error when they mix
  // host and GPU memory or the GPU memory cannot be used.
  Result<std::optional<DeviceBuffers>> locate_device(const CollectiveCall& call,
                                                     const CallBytes& bytes);
  Result<std::shared_ptr<RequestState>> submit_device(const CollectiveCall& call,
                                                      const DeviceBuffers& buffers);
  // The id of `allocation` at the daemon, registering it first if needed.
  Result<std::uint32_t> registered_id(const DeviceAllocation& allocation);
  Status send_registration(std::uint32_t id, const DeviceAllocation& allocation);
  Status on_register_reply(const wire::RegisterDeviceReply& reply);
  void send_unregister(std::uint32_t id);
  // Best effort: tells the daemon a buffer is no longer used.
  void send_free(std::uint32_t buffer_id);

  // Until done() (checked under mu_) is true, reads the daemon's answers (or
  // lets the thread that reads do it); then, if reading ended, waits on
  // alloc_cv_ for finish().
  void await_reply(const std::function<bool()>& done);
  Status dispatch(wire::Message& message);
  Status on_alloc_reply(const wire::AllocReply& reply);
  Status on_completion(const wire::Completion& completion);
  // Marks the connection broken with `why` (the first reason wins) and shuts it
  // down: the next read fails and finish() runs.
  void fail_connection(const Status& why);
  // The connection ended: every pending request and allocation ends with the
  // reason it closed.
  void finish(const Status& why);

  const Settings settings_;
  const std::unique_ptr<Connection> connection_;
  const std::string daemon_version_;
  int node_rank_ = 0;
  int num_nodes_ = 1;
  SharedBuffers buffers_;
  BouncePool pool_;
  const std::shared_ptr<DeviceMemory> device_;
  DeviceRegistry devices_;
  std::mutex register_mu_;  // one registration round trip at a time
  std::atomic<void*> device_stream_{nullptr};
  std::atomic<std::uint64_t> next_request_id_{1};

  std::mutex mu_;
  std::condition_variable alloc_cv_;  // allocations and registrations answered
  std::unordered_map<std::uint64_t, Pending> pending_;
  std::optional<Status> closed_;  // set once: why no more requests are accepted

  // Last: reads into everything above; request states share it, so a wait on
  // a handle outlives the context safely (it is detached first).
  std::shared_ptr<Progress> progress_;
};

}  // namespace ringsync::client
