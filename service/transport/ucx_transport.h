// The Transport between daemons over UCX tag matching (see DESIGN.md, "UCX").
//
// - Messages are tagged sends and receives (ucp_tag_send_nbx / ucp_tag_recv_nbx);
//   the sender's rank is folded into the UCX tag (ucx_tag.h), so a receive from
//   node p matches only what p sent under that tag.
// - UCX completions are collected as they happen and the callbacks run inside
//   progress() (or cancel_all()), on the calling thread, never inside UCX.
// - Every endpoint runs in UCX's peer-failure mode. When UCX reports a node
//   lost, every operation to or from it completes with PeerLost naming it: UCX
//   fails the sends, and the posted receives are cancelled here (UCX leaves them
//   pending forever otherwise). Later operations with that node fail the same way.
//   UCX notices a killed peer within milliseconds over tcp (its sockets close),
//   but in minutes of measuring never noticed a stopped peer, nor a killed one
//   behind shared memory (docs/ucx.md). The owner's heartbeat deadline is the
//   bound that matters: on expiry it calls cancel_all().
// - cancel_all() ends the transport: it cancels the posted receives,
//   force-closes every endpoint (which fails the sends), and completes every
//   outstanding operation with `why` before it returns. Operations posted
//   afterwards complete with `why` too. It is local: the other nodes learn that
//   this one is gone when its worker is destroyed (its connections drop) or
//   from the control plane.
//
// Single-threaded: one thread makes every call (the worker is created in
// UCS_THREAD_MODE_SINGLE). Callbacks may post new operations and may call
// cancel_all(), but must not destroy the transport.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "service/transport/transport.h"
#include "service/transport/ucx_context.h"
#include "service/transport/ucx_tag.h"

namespace ringsync::service::transport {

class UcxTransport final : public Transport {
 public:
  // `addresses[r]` is node r's UcxContext::address(), as the control plane
  // exchanged them; size() is addresses.size(). The entry for `rank` itself is
  // not read (this node reaches itself through `ucx`'s own address).
  // tag_key: XORed into every UCX tag (ucx_tag.h); 0 for a job without a key.
  static Result<std::unique_ptr<UcxTransport>> create(std::unique_ptr<UcxContext> ucx, int rank,
                                                       std::vector<std::vector<std::byte>> addresses,
                                                       std::uint64_t tag_key = 0);
  // Cancels what is outstanding without running its callbacks (call
  // cancel_all() first to have them run), force-closes the endpoints that
  // disconnect() did not close, and destroys the worker: the other nodes' UCX
  // now sees this one lost. Never waits for another node.
  ~UcxTransport() override;
  UcxTransport(const UcxTransport&) = delete;
  UcxTransport& operator=(const UcxTransport&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(peers_.size()); }

  void send(int peer, std::uint64_t tag, const void* data, std::size_t bytes, Callback done) override;
  void recv(int peer, std::uint64_t tag, void* data, std::size_t bytes, Callback done) override;

  bool progress() override;
  int event_fd() const override { return ucx_->event_fd(); }
  bool arm() override;
  void cancel_all(const Status& why) override;

  // The orderly end of a job, after its last collective completed on every node
  // (a final barrier): closes every endpoint gracefully, so the other nodes see
  // a disconnect rather than a failure. Keep calling progress() until
  // disconnected(), within the owner's deadline, then destroy the transport.
  // Operations still outstanding make it cancel_all(Closed) instead; operations
  // posted afterwards complete with Closed.
  void disconnect();
  bool disconnected() const;

  // Whether UCX reported node `peer` lost.
  bool peer_lost(int peer) const;
  // Operations whose callbacks have not run yet.
  std::size_t outstanding() const;
  // UCX's description of the endpoint to `peer`: the transports (lanes) and
  // protocol thresholds it chose, as `ucx_info -e` prints them. Final once the
  // first message to the peer completed; empty after the endpoint was closed.
  std::string endpoint_info(int peer) const;
  // The lanes' transports and devices from endpoint_info(), each once, in lane
  // order: "tcp/eth0", "rc_mlx5/mlx5_0:1,ud_mlx5/mlx5_0:1".
  std::string peer_transports(int peer) const override;

 private:
  struct Peer {
    UcxTransport* owner = nullptr;
    int rank = 0;
    ucp_ep_h ep = nullptr;
    bool lost = false;
    ucs_status_t error = UCS_OK;  // why UCX declared it lost
  };
  // One posted send or receive, from send()/recv() until both its callback ran
  // and UCX released its request.
  struct Op {
    UcxTransport* owner = nullptr;
    std::uint64_t id = 0;
    int peer = 0;
    bool is_recv = false;
    std::uint64_t tag = 0;
    std::size_t bytes = 0;
    Callback done;                  // empty once it ran
    void* request = nullptr;        // UCX's request, until freed
    bool in_ucx = false;            // UCX may still touch the buffer
    ucs_status_t ucx_status = UCS_OK;
    std::size_t received = 0;       // receives: bytes UCX delivered
    std::optional<Status> verdict;  // decided here (invalid, peer lost, cancelled)
  };

  UcxTransport(std::unique_ptr<UcxContext> ucx, int rank, int size, std::uint64_t tag_key);

  static void on_send_done(void* request, ucs_status_t status, void* user_data);
  static void on_recv_done(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                           void* user_data);
  static void on_peer_error(void* arg, ucp_ep_h ep, ucs_status_t status);

  Status connect(int peer, const std::vector<std::byte>& address);
  Op& add_op(int peer, bool is_recv, std::uint64_t tag, std::size_t bytes, Callback done);
  // Why an operation with `peer` cannot be posted, or Ok.
  Status refusal(int peer, const void* data, std::size_t bytes) const;
  // Records the request (or the error) that posting `op` to UCX returned.
  void track(Op& op, void* request);
  // Completes `op` with `why` at the next run_ready().
  void decide(Op& op, Status why);
  template <typename Pred>
  void fail_ops(Pred pred, const Status& why);
  Status outcome(const Op& op) const;
  Status lost_status(int peer) const;
  std::string describe(const Op& op) const;

  int drain_worker();
  void handle_lost_peers();
  void close_endpoint(Peer& peer, bool force);
  void reap_closing();
  bool run_ready();

  std::unique_ptr<UcxContext> ucx_;
  int rank_;
  UcxTagCodec codec_;
  std::vector<std::unique_ptr<Peer>> peers_;
  std::unordered_map<std::uint64_t, Op> ops_;  // node-based: an Op never moves
  std::uint64_t next_op_id_ = 1;
  std::deque<std::uint64_t> ready_;   // ops whose callbacks are due
  std::vector<int> newly_lost_;       // reported by UCX, not handled yet
  std::vector<void*> closing_;        // endpoint close requests in flight
  std::optional<Status> closed_;      // set by cancel_all() and disconnect()
  bool cancelled_ = false;            // cancel_all(): UCX is never progressed again
};

// The transports named by the lane lines of ucp_ep_print_info() text, each
// once: "tcp/lo,tcp/eth0". "" when there is none.
std::string lane_transports(const std::string& endpoint_info);

}  // namespace ringsync::service::transport
