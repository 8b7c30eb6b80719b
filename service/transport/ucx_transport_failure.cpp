// Lost peers, cancel_all() and teardown of the UCX transport.
#include <algorithm>
#include <cstring>

#include "common/log.h"
#include "service/transport/ucx_transport.h"

namespace ringsync::service::transport {

void UcxTransport::on_peer_error(void* arg, ucp_ep_h /*ep*/, ucs_status_t status) {
  // Inside ucp_worker_progress(): only record it; progress() acts on it after.
  auto* peer = static_cast<Peer*>(arg);
  if (peer->lost) return;
  peer->lost = true;
  peer->error = status;
  peer->owner->newly_lost_.push_back(peer->rank);
}

template <typename Pred>
void UcxTransport::fail_ops(Pred pred, const Status& why) {
  std::vector<std::uint64_t> doomed;
  for (auto& [id, op] : ops_) {
    if (op.done && !op.verdict && pred(op)) doomed.push_back(id);
  }
  for (std::uint64_t id : doomed) {
    Op& op = ops_.at(id);
    op.verdict = why;
    // A posted receive stays posted after its peer died: only cancelling ends it.
    // Sends end when their endpoint is closed, which the caller does next.
    if (op.in_ucx && op.is_recv && op.request != nullptr) ucp_request_cancel(ucx_->worker(), op.request);
    ready_.push_back(id);
  }
}

void UcxTransport::handle_lost_peers() {
  if (newly_lost_.empty()) return;
  while (!newly_lost_.empty()) {
    const int lost = newly_lost_.back();
    newly_lost_.pop_back();
    const Status why = lost_status(lost);
    // After cancel_all() the ring is being torn down on purpose and every
    // endpoint is going away; with nothing in flight to the peer (a ring
    // whose run ended, closed by the peer first) nothing is lost either:
    // neither is news worth a warning. The job's verdict names the machine.
    const bool in_flight = std::any_of(ops_.begin(), ops_.end(), [lost](const auto& entry) {
      return entry.second.peer == lost && !entry.second.verdict;
    });
    if (closed_ || !in_flight) {
      RS_LOG(debug, "ucx") << why.message();
    } else {
      RS_LOG(warn, "ucx") << why.message();
    }
    fail_ops([lost](const Op& op) { return op.peer == lost; }, why);
    close_endpoint(*peers_[lost], /*force=*/true);
  }
  drain_worker();  // lets UCX hand back the cancelled requests
}

void UcxTransport::cancel_all(const Status& why) {
  if (!closed_) closed_ = why;
  cancelled_ = true;
  fail_ops([](const Op&) { return true; }, why);
  for (auto& peer : peers_) close_endpoint(*peer, /*force=*/true);
  drain_worker();
  reap_closing();
  // Every callback runs now, even for a request UCX has not handed back: the
  // endpoints are gone, so UCX moves no more data through its buffer; the
  // request is freed when UCX returns it, or with the worker.
  run_ready();
}

void UcxTransport::close_endpoint(Peer& peer, bool force) {
  if (peer.ep == nullptr) return;
  ucp_request_param_t param;
  std::memset(&param, 0, sizeof(param));
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  void* request = ucp_ep_close_nbx(peer.ep, &param);
  peer.ep = nullptr;
  if (UCS_PTR_IS_ERR(request)) {
    RS_LOG(debug, "ucx") << ucx_error(UCS_PTR_STATUS(request),
                                      "closing the endpoint to node " + std::to_string(peer.rank))
                                .message();
  } else if (request != nullptr) {
    closing_.push_back(request);
  }
}

void UcxTransport::reap_closing() {
  std::erase_if(closing_, [](void* request) {
    if (ucp_request_check_status(request) == UCS_INPROGRESS) return false;
    ucp_request_free(request);
    return true;
  });
}

void UcxTransport::disconnect() {
  const Status why = Status::Closed("the UCX transport was disconnected at the end of the job");
  if (outstanding() > 0) return cancel_all(why);
  if (!closed_) closed_ = why;
  for (auto& peer : peers_) close_endpoint(*peer, /*force=*/false);
}

bool UcxTransport::disconnected() const {
  if (!closing_.empty()) return false;
  for (const auto& peer : peers_) {
    if (peer->ep != nullptr) return false;
  }
  return true;
}

UcxTransport::~UcxTransport() {
  // Outstanding callbacks are dropped, never run: their owners may be half
  // destroyed by now. An owner that wants them calls cancel_all() first.
  for (auto& [id, op] : ops_) op.done = nullptr;
  for (auto& [id, op] : ops_) {
    if (op.in_ucx && op.is_recv && op.request != nullptr) ucp_request_cancel(ucx_->worker(), op.request);
  }
  for (auto& peer : peers_) close_endpoint(*peer, /*force=*/true);
  // No progress from here on: a receive UCX matched to an eager message would
  // take the message's later fragments into a buffer its owner may have freed
  // (cancelling stops only unmatched receives). Destroying the worker ends it all.
  reap_closing();
  for (void* request : closing_) ucp_request_free(request);  // released when UCX finishes it
  for (auto& [id, op] : ops_) {
    if (op.request != nullptr) ucp_request_free(op.request);
  }
  // Destroy the worker while ops_ still exists: UCX may call back into it.
  ucx_.reset();
}

}  // namespace ringsync::service::transport
