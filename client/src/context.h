// One connection of a trainer to its ringsyncd: the handshake, the receiver
// thread that completes requests, shared buffers and the staging pool.
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
#include "client/src/env.h"
#include "client/src/placement.h"
#include "client/src/requests.h"
#include "client/src/staging_pool.h"
#include "common/status.h"

namespace ringsync::client {

class Context {
 public:
  // Connects, says hello and starts the receiver thread. The daemon's refusal
  // comes back as its status and message.
  static Result<std::unique_ptr<Context>> connect(const Settings& settings);

  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  // Closes the connection: pending requests complete with kClosed, shared and
  // staging buffers are unmapped.
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

  // Validates, places (zero copy or staged), copies in and sends one collective.
  // The returned state completes when the daemon answers or the connection ends.
  Result<std::shared_ptr<RequestState>> submit(const CollectiveCall& call);

  // For tests: idle staging buffers kept for reuse.
  std::size_t idle_staging_buffers() const { return pool_.idle_count(); }

 private:
  struct IssuedBuffer {
    std::uint32_t buffer_id = 0;
    shm::Region memory;
  };
  struct PendingAlloc {
    std::size_t bytes = 0;
    bool done = false;
    std::optional<Result<IssuedBuffer>> result;
  };
  struct PendingCollective {
    std::shared_ptr<RequestState> state;
    Placement placement;
    std::optional<StagingBuffer> staging;
    std::vector<std::uint32_t> pinned;  // shared buffers the request uses
  };
  using Pending = std::variant<PendingCollective, std::shared_ptr<PendingAlloc>>;

  Context(Settings settings, std::unique_ptr<Connection> connection, std::string daemon_version);

  Result<IssuedBuffer> allocate_buffer(std::size_t bytes);
  Result<StagingBuffer> acquire_staging(std::size_t bytes);
  // Unpins the request's buffers and returns its staging buffer to the pool.
  void release(PendingCollective& pending);
  // Best effort: tells the daemon a buffer is no longer used.
  void send_free(std::uint32_t buffer_id);

  void receive_loop();
  Status dispatch(wire::Message& message);
  Status on_alloc_reply(const wire::AllocReply& reply);
  Status on_completion(const wire::Completion& completion);
  // Marks the connection broken with `why` (the first reason wins) and wakes the receiver.
  void fail_connection(const Status& why);
  // The receiver's last act: every pending request and allocation ends with the
  // reason the connection closed.
  void finish(const Status& why);

  const Settings settings_;
  const std::unique_ptr<Connection> connection_;
  const std::string daemon_version_;
  int node_rank_ = 0;
  int num_nodes_ = 1;
  SharedBuffers buffers_;
  StagingPool pool_;
  std::atomic<std::uint64_t> next_request_id_{1};

  std::mutex mu_;
  std::condition_variable alloc_cv_;
  std::unordered_map<std::uint64_t, Pending> pending_;
  std::optional<Status> closed_;  // set once: why no more requests are accepted

  std::thread receiver_;  // last: started once everything above exists
};

}  // namespace ringsync::client
