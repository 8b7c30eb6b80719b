// Posting, completing and progressing operations. Failure handling and
// teardown live in ucx_transport_failure.cpp.
#include "service/transport/ucx_transport.h"

#include <algorithm>

#include <cstring>
#include <utility>

#include "common/log.h"

namespace ringsync::service::transport {

namespace {

// Bound on ucp_worker_progress() calls per progress(), so a stream of arriving
// fragments cannot keep the caller's loop from running callbacks.
constexpr int kProgressRounds = 64;

// UCX statuses that mean the connection to the peer is gone.
bool is_connection_failure(ucs_status_t s) {
  switch (s) {
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_REJECTED:
    case UCS_ERR_IO_ERROR:
    case UCS_ERR_TIMED_OUT:
    case UCS_ERR_CANCELED:
      return true;
    default:
      return false;
  }
}

ucp_request_param_t request_param(void* op) {
  ucp_request_param_t param;
  std::memset(&param, 0, sizeof(param));
  // Every completion, even an immediate one, goes through the callback.
  param.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  param.user_data = op;
  return param;
}

}  // namespace

UcxTransport::UcxTransport(std::unique_ptr<UcxContext> ucx, int rank, int size, std::uint64_t tag_key)
    : ucx_(std::move(ucx)), rank_(rank), codec_(size, tag_key) {
  peers_.reserve(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) {
    auto peer = std::make_unique<Peer>();
    peer->owner = this;
    peer->rank = r;
    peers_.push_back(std::move(peer));
  }
}

Result<std::unique_ptr<UcxTransport>> UcxTransport::create(std::unique_ptr<UcxContext> ucx, int rank,
                                                           std::vector<std::vector<std::byte>> addresses,
                                                           std::uint64_t tag_key) {
  if (ucx == nullptr) return Status::InvalidArgument("UcxTransport needs a UcxContext");
  if (addresses.empty()) return Status::InvalidArgument("a UCX job needs at least one node's address");
  const int size = static_cast<int>(addresses.size());
  if (rank < 0 || rank >= size) {
    return Status::InvalidArgument("node rank " + std::to_string(rank) + " is outside a job of " +
                                   std::to_string(size) + " nodes");
  }
  for (int r = 0; r < size; ++r) {
    if (r != rank && addresses[r].empty()) {
      return Status::InvalidArgument("node " + std::to_string(r) +
                                     " has no UCX worker address: did its bootstrap complete?");
    }
  }
  std::unique_ptr<UcxTransport> transport(new UcxTransport(std::move(ucx), rank, size, tag_key));
  for (int r = 0; r < size; ++r) {
    const auto& address = r == rank ? transport->ucx_->address() : addresses[r];
    RINGSYNC_RETURN_IF_ERROR(transport->connect(r, address));
  }
  return transport;
}

Status UcxTransport::connect(int peer, const std::vector<std::byte>& address) {
  ucp_ep_params_t params;
  std::memset(&params, 0, sizeof(params));
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(address.data());
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = &UcxTransport::on_peer_error;
  params.err_handler.arg = peers_[peer].get();
  if (ucs_status_t s = ucp_ep_create(ucx_->worker(), &params, &peers_[peer]->ep); s != UCS_OK) {
    peers_[peer]->ep = nullptr;
    return ucx_error(s, "cannot create a UCX endpoint to node " + std::to_string(peer) +
                            " (do both nodes share a transport? compare UCX_TLS and UCX_NET_DEVICES)");
  }
  return Status::Ok();
}

UcxTransport::Op& UcxTransport::add_op(int peer, bool is_recv, std::uint64_t tag, std::size_t bytes,
                                       Callback done) {
  const std::uint64_t id = next_op_id_++;
  Op& op = ops_[id];
  op.owner = this;
  op.id = id;
  op.peer = peer;
  op.is_recv = is_recv;
  op.tag = tag;
  op.bytes = bytes;
  op.done = std::move(done);
  return op;
}

Status UcxTransport::refusal(int peer, const void* data, std::size_t bytes) const {
  if (closed_) return *closed_;
  if (peer < 0 || peer >= size()) {
    return Status::InvalidArgument("node " + std::to_string(peer) + " is not in this job of " +
                                   std::to_string(size()) + " nodes");
  }
  if (data == nullptr && bytes > 0) {
    return Status::InvalidArgument("a message of " + std::to_string(bytes) + " bytes needs a buffer");
  }
  if (peers_[peer]->lost) return lost_status(peer);
  return Status::Ok();
}

void UcxTransport::send(int peer, std::uint64_t tag, const void* data, std::size_t bytes, Callback done) {
  Op& op = add_op(peer, false, tag, bytes, std::move(done));
  if (Status why = refusal(peer, data, bytes); !why.ok()) return decide(op, std::move(why));
  ucp_request_param_t param = request_param(&op);
  param.cb.send = &UcxTransport::on_send_done;
  op.in_ucx = true;
  track(op, ucp_tag_send_nbx(peers_[peer]->ep, data, bytes, codec_.encode(rank_, tag), &param));
}

void UcxTransport::recv(int peer, std::uint64_t tag, void* data, std::size_t bytes, Callback done) {
  Op& op = add_op(peer, true, tag, bytes, std::move(done));
  if (Status why = refusal(peer, data, bytes); !why.ok()) return decide(op, std::move(why));
  ucp_request_param_t param = request_param(&op);
  param.cb.recv = &UcxTransport::on_recv_done;
  op.in_ucx = true;
  const ucp_tag_t full_mask = ~ucp_tag_t{0};
  track(op, ucp_tag_recv_nbx(ucx_->worker(), data, bytes, codec_.encode(peer, tag), full_mask, &param));
}

void UcxTransport::track(Op& op, void* request) {
  if (UCS_PTR_IS_ERR(request)) {
    op.in_ucx = false;
    const ucs_status_t s = UCS_PTR_STATUS(request);
    if (is_connection_failure(s)) return decide(op, lost_status(op.peer));
    return decide(op, ucx_error(s, "UCX refused " + describe(op)));
  }
  if (request == nullptr) {  // completed at once despite NO_IMM_CMPL
    op.in_ucx = false;
    op.ucx_status = UCS_OK;
    op.received = op.bytes;
    ready_.push_back(op.id);
    return;
  }
  op.request = request;  // the callback may have run already: it saw the same pointer
}

void UcxTransport::decide(Op& op, Status why) {
  op.verdict = std::move(why);
  ready_.push_back(op.id);
}

void UcxTransport::on_send_done(void* request, ucs_status_t status, void* user_data) {
  auto* op = static_cast<Op*>(user_data);
  op->request = request;
  op->in_ucx = false;
  op->ucx_status = status;
  op->owner->ready_.push_back(op->id);
}

void UcxTransport::on_recv_done(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info,
                                void* user_data) {
  auto* op = static_cast<Op*>(user_data);
  op->request = request;
  op->in_ucx = false;
  op->ucx_status = status;
  op->received = (status == UCS_OK && info != nullptr) ? info->length : 0;
  op->owner->ready_.push_back(op->id);
}

std::string UcxTransport::describe(const Op& op) const {
  return std::string(op.is_recv ? "receiving " : "sending ") + std::to_string(op.bytes) + " bytes " +
         (op.is_recv ? "from" : "to") + " node " + std::to_string(op.peer) + " under " +
         describe_tag(op.tag);
}

Status UcxTransport::outcome(const Op& op) const {
  const std::string peer = "node " + std::to_string(op.peer);
  if (op.ucx_status == UCS_OK) {
    if (!op.is_recv || op.received == op.bytes) return Status::Ok();
    return Status::ProtocolError(peer + " sent " + std::to_string(op.received) + " bytes under " +
                                 describe_tag(op.tag) + " where this node expected " +
                                 std::to_string(op.bytes) +
                                 " bytes: the nodes disagree on the message layout (same version everywhere?)");
  }
  if (op.ucx_status == UCS_ERR_MESSAGE_TRUNCATED) {
    return Status::ProtocolError(peer + " sent more bytes under " + describe_tag(op.tag) +
                                 " where this node expected " + std::to_string(op.bytes) +
                                 " bytes: the nodes disagree on the message layout (same version everywhere?)");
  }
  if (peers_[op.peer]->lost || is_connection_failure(op.ucx_status)) return lost_status(op.peer);
  return ucx_error(op.ucx_status, describe(op) + " failed");
}

Status UcxTransport::lost_status(int peer) const {
  const ucs_status_t why = peers_[peer]->error;
  return Status::PeerLost("node " + std::to_string(peer) + " is lost (UCX: " +
                          (why == UCS_OK ? "its connection failed" : ucs_status_string(why)) +
                          "); its collectives cannot complete: re-form the job once it is back");
}

int UcxTransport::drain_worker() {
  int rounds = 0;
  while (rounds < kProgressRounds && ucp_worker_progress(ucx_->worker()) != 0) ++rounds;
  return rounds;
}

bool UcxTransport::progress() {
  // After cancel_all() UCX is never progressed again: a receive it had matched
  // to an eager message would go on filling the buffer with the message's later
  // fragments (cancelling stops only unmatched receives), and that buffer was
  // handed back when cancel_all() reported the receive. The worker goes with
  // this transport.
  if (cancelled_) return run_ready();
  const bool progressed = drain_worker() > 0;
  handle_lost_peers();
  reap_closing();
  const bool ran = run_ready();
  return ran || progressed;
}

bool UcxTransport::arm() {
  if (!ready_.empty() || !newly_lost_.empty()) return false;
  const ucs_status_t s = ucp_worker_arm(ucx_->worker());
  if (s == UCS_OK) return true;
  if (s != UCS_ERR_BUSY) RS_LOG(warn, "ucx") << ucx_error(s, "cannot arm the UCX worker").message();
  return false;
}

bool UcxTransport::run_ready() {
  bool ran = false;
  while (!ready_.empty()) {
    const std::uint64_t id = ready_.front();
    ready_.pop_front();
    auto it = ops_.find(id);
    if (it == ops_.end()) continue;  // queued twice; already finished
    Op& op = it->second;
    if (!op.in_ucx && op.request != nullptr) {
      ucp_request_free(op.request);
      op.request = nullptr;
    }
    if (!op.done) {  // reported earlier; now UCX let go of it too
      if (!op.in_ucx) ops_.erase(it);
      continue;
    }
    if (op.in_ucx && !op.verdict) continue;  // not finished: a stale entry
    Status status = op.verdict ? *op.verdict : outcome(op);
    Callback done = std::move(op.done);
    op.done = nullptr;
    if (!op.in_ucx) ops_.erase(it);
    done(status);
    ran = true;
  }
  return ran;
}

bool UcxTransport::peer_lost(int peer) const {
  return peer >= 0 && peer < size() && peers_[peer]->lost;
}

std::size_t UcxTransport::outstanding() const {
  std::size_t n = 0;
  for (const auto& [id, op] : ops_) n += op.done ? 1 : 0;
  return n;
}

std::string UcxTransport::endpoint_info(int peer) const {
  if (peer < 0 || peer >= size() || peers_[peer]->ep == nullptr) return {};
  char* text = nullptr;
  std::size_t length = 0;
  FILE* stream = open_memstream(&text, &length);
  if (stream == nullptr) return {};
  ucp_ep_print_info(peers_[peer]->ep, stream);
  std::fclose(stream);
  std::string info(text, length);
  std::free(text);
  return info;
}

std::string UcxTransport::peer_transports(int peer) const { return lane_transports(endpoint_info(peer)); }

std::string lane_transports(const std::string& endpoint_info) {
  // Lines such as "#   lane[1]:  2:tcp/lo.0 md[1]  -> md[1]/tcp/sysdev[255] rma_bw#0":
  // the word after "N:" is transport/device.index.
  std::vector<std::string> seen;
  std::size_t at = 0;
  while ((at = endpoint_info.find("lane[", at)) != std::string::npos) {
    const std::size_t end = endpoint_info.find('\n', at);
    const std::string line = endpoint_info.substr(at, end == std::string::npos ? std::string::npos : end - at);
    at = end == std::string::npos ? endpoint_info.size() : end;
    const std::size_t colon = line.find(':', line.find(']'));
    if (colon == std::string::npos) continue;
    const std::size_t start = line.find(':', line.find_first_not_of(' ', colon + 1));
    if (start == std::string::npos) continue;
    std::string word = line.substr(start + 1, line.find(' ', start + 1) - start - 1);
    if (const std::size_t dot = word.rfind('.'); dot != std::string::npos && word.find('/') < dot) word.erase(dot);
    if (!word.empty() && std::find(seen.begin(), seen.end(), word) == seen.end()) seen.push_back(word);
  }
  std::string out;
  for (const auto& w : seen) out += (out.empty() ? "" : ",") + w;
  return out;
}

}  // namespace ringsync::service::transport
