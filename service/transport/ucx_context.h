// One node's UCX machinery: a UCP context (tag matching + wakeup) and one
// worker on it, in single-thread mode. The worker's address is packed into bytes
// at creation, for the control plane to send to the other nodes; a UcxTransport
// is then built from this context and every node's address.
//
// UCX also reads its UCX_* environment variables; the options below override
// them where set, so a daemon's own configuration wins.
#pragma once

#include <ucp/api/ucp.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace ringsync::service::transport {

struct UcxOptions {
  // UCX_TLS: comma list of transports, e.g. "tcp,self" or "tcp,sm,self".
  // Empty leaves UCX's choice (its environment, else every transport).
  std::string transports;
  // UCX_NET_DEVICES: network devices, e.g. "lo" or "eth0". Empty leaves UCX's choice.
  std::string net_devices;
  // Endpoints run in peer-failure mode, which this UCX (1.13) refuses for its
  // shared-memory transports unless they are told to handle errors
  // (UCX_MM_ERROR_HANDLING). true allows them; false leaves UCX's setting, and
  // then same-host peers talk over tcp.
  bool shm_error_handling = true;
  // UCX_TCP_CONN_NB: connect tcp endpoints without blocking. Blocking (UCX's
  // default), two nodes connecting to each other at once (every bootstrap)
  // sometimes get "connection refused" or an abort: 2-4 % of start-ups, none of
  // 900 non-blocking.
  bool tcp_nonblocking_connect = true;
  // UCX_RNDV_THRESH=inf and UCX_ZCOPY_THRESH=inf when no RDMA link is possible
  // (no verbs transport allowed, or no verbs device here), each unless the
  // environment sets it: every message goes eager. Over tcp, rendezvous gains
  // no zero copy but its handshake queues behind the data in flight (64 MiB on
  // a 1 Gbit/s link: 0.55 of the bound with it, 0.91 without;
  // docs/benchmarks-history.md, "UCX over tcp, 2026-12-02"); eager zero copy
  // aborts this UCX (1.13) when the peer dies mid-send (test_ucx_failure). The
  // price: a node may run ahead of its neighbour's receives by its first
  // step's sends, held in UCX's buffers (the footprint in docs/benchmarks.md).
  bool eager_without_rdma = true;
  // Where the kernel lists RDMA (verbs) devices: none there means no RDMA link,
  // whatever `transports` allows.
  std::string verbs_device_dir = "/sys/class/infiniband";
  // UCX_TCP_TX_SEG_SIZE and UCX_TCP_RX_SEG_SIZE when tcp may be used (neither when
  // the environment sets one; 0 leaves UCX's 8 KiB / 64 KiB): the fragments an
  // eager message is cut into, one send() each. The daemon sizes them to its
  // ring chunks (tcp_segment_for; docs/benchmarks-history.md, "Tcp segments of
  // half a ring chunk (2026-12-05, evening)").
  std::size_t tcp_segment_bytes = 256 * 1024;
};

// Room for UCX's headers in a tcp segment (UCP's tag header and UCT tcp's, a few
// dozen bytes together), with ample to spare.
inline constexpr std::size_t kTcpHeaderRoom = 4 * 1024;
// The largest tcp segment tcp_segment_for gives (4 MiB - 64 B): UCX's v2 worker
// addresses (UCX_ADDRESS_VERSION=v2) carry a transport's largest copied message
// in 64-byte units in 16 bits, and UCX aborts on a larger one. Larger messages
// go in fragments of this size, far beyond what one send() gains from.
inline constexpr std::size_t kMaxTcpSegmentBytes = 65535 * 64;
// The tcp segment that carries a message of up to `message_bytes` in two large
// eager fragments, none left over (up to kMaxTcpSegmentBytes). Two, not one:
// UCX completes a one-fragment send once copied, before any of it reached the
// kernel, and the link metrics' send-busy time (which SlowLink reads) would
// miss the transfer. Every node of a ring must use the same (a smaller receive
// segment than a peer's fragments aborts UCX).
std::size_t tcp_segment_for(std::size_t message_bytes);

// The RDMA (verbs) devices in `dir` (/sys/class/infiniband): mlx5_0, rxe0, ...
std::vector<std::string> verbs_devices(const std::string& dir);

// Status for a failed UCX call: "<what>: <UCX's words> (UCX status <n>)".
Status ucx_error(ucs_status_t status, const std::string& what);

class UcxContext {
 public:
  // Reads UCX's configuration, applies `options`, creates the context, the worker
  // and its wakeup descriptor, and packs the worker address.
  static Result<std::unique_ptr<UcxContext>> create(const UcxOptions& options);
  ~UcxContext();
  UcxContext(const UcxContext&) = delete;
  UcxContext& operator=(const UcxContext&) = delete;

  ucp_context_h context() const { return context_; }
  ucp_worker_h worker() const { return worker_; }
  // The worker's wakeup descriptor (owned by UCX: never close it).
  int event_fd() const { return event_fd_; }
  // The packed worker address, for the other nodes' UcxTransport.
  const std::vector<std::byte>& address() const { return address_; }
  // True when this UCX can move CUDA device memory itself (built with CUDA
  // support; Debian's is not). GPU buffers are staged through host memory either
  // way for now; this only tells where direct transfers would be possible.
  bool cuda_memory() const { return cuda_memory_; }

 private:
  UcxContext() = default;

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int event_fd_ = -1;
  std::vector<std::byte> address_;
  bool cuda_memory_ = false;
};

}  // namespace ringsync::service::transport
