// What the daemon does with each message a trainer sends.
#include <cstring>
#include <variant>

#include "common/log.h"
#include "common/version.h"
#include "service/collective/node_operation.h"
#include "service/daemon.h"
#include "service/device/service.h"

namespace ringsync::service {

namespace {

constexpr std::uint32_t kMaxLocalSize = 4096;
constexpr std::size_t kMaxTensorName = 4096;

bool overflows(std::uint64_t count, std::uint64_t elem, std::uint64_t factor = 1) {
  if (elem == 0 || count == 0) return false;
  const std::uint64_t limit = UINT64_MAX / elem / factor;
  return count > limit;
}

// Send and receive ranges of one rank must be identical or disjoint, except for
// the in-place allgather (send is this rank's slot of recv).
bool partially_overlap(const std::byte* a, std::uint64_t a_bytes, const std::byte* b,
                       std::uint64_t b_bytes) {
  if (!a || !b || a_bytes == 0 || b_bytes == 0) return false;
  return a < b + b_bytes && b < a + a_bytes;
}

}  // namespace

Status Daemon::on_message(const std::shared_ptr<local::ClientSession>& session, wire::Message message) {
  session->liveness.heard = Clock::now();
  if (auto* hello = std::get_if<wire::Hello>(&message)) return on_hello(session, *hello);
  if (!session->membership)
    return Status::ProtocolError("the first message on a connection must be a hello");
  if (auto* beat = std::get_if<wire::Heartbeat>(&message)) {
    session->liveness.waiting_for = beat->waiting_for;
    return Status::Ok();
  }
  if (std::get_if<wire::Leave>(&message)) {
    session->liveness.left = true;
    return Status::Ok();
  }
  return std::visit(
      [&](auto& m) -> Status {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, wire::AllocBuffer>) {
          on_alloc(session, m);
          return Status::Ok();
        } else if constexpr (std::is_same_v<T, wire::FreeBuffer>) {
          on_free(session, m);
          return Status::Ok();
        } else if constexpr (std::is_same_v<T, wire::Collective>) {
          on_collective(session, std::move(m));
          return Status::Ok();
        } else if constexpr (std::is_same_v<T, wire::RegisterDevice>) {
          devices().register_allocation(session, m);
          return Status::Ok();
        } else if constexpr (std::is_same_v<T, wire::UnregisterDevice>) {
          devices().unregister_allocation(*session, m.allocation_id);
          return Status::Ok();
        } else if constexpr (std::is_same_v<T, wire::KeepState>) {
          on_keep_state(session, m);
          return Status::Ok();
        } else if constexpr (std::is_same_v<T, wire::FetchState>) {
          on_fetch_state(session, m);
          return Status::Ok();
        } else if constexpr (std::is_same_v<T, wire::NodesWaiting>) {
          const cluster::JobRing* ring = ring_of(session->membership->job_id);
          session->send(wire::NodesWaitingReply{m.request_id, ring ? ring->nodes_waiting() : 0u});
          return Status::Ok();
        } else {
          return Status::ProtocolError("a client may not send a reply message");
        }
      },
      message);
}

device::DeviceService& Daemon::devices() {
  if (!devices_) devices_ = std::make_shared<device::DeviceService>(io_, pool_, metrics_, device::cuda_backend());
  return *devices_;
}

void Daemon::on_alloc(const std::shared_ptr<local::ClientSession>& session,
                      const wire::AllocBuffer& alloc) {
  const auto& who = *session->membership;
  auto job = jobs_.find(who.job_id);
  if (job != jobs_.end() && alloc.bytes > config_.max_job_buffer_bytes - std::min(config_.max_job_buffer_bytes,
                                                                                  job->second.buffer_bytes())) {
    metrics_.error(observe::ErrorKind::kAlloc);
    session->send(wire::AllocReply{
        alloc.request_id,
        Status::OutOfMemory("job '" + who.job_id + "' has " + std::to_string(job->second.buffer_bytes()) +
                            " bytes of shared buffers on this node; " + std::to_string(alloc.bytes) +
                            " more would pass the limit of " + std::to_string(config_.max_job_buffer_bytes) +
                            " (--max-job-buffer-bytes); free some, or raise the limit"),
        0, 0});
    return;
  }
  auto region = session->buffers.allocate(
      alloc.bytes, config_.max_client_buffer_bytes,
      "ringsync:" + who.job_id + ":" + std::to_string(who.local_rank));
  if (!region.ok()) {
    metrics_.error(observe::ErrorKind::kAlloc);
    session->send(wire::AllocReply{alloc.request_id, region.status(), 0, 0});
    return;
  }
  auto [id, shared] = std::move(region).value();
  if (job != jobs_.end()) job->second.add_buffer_bytes(static_cast<std::int64_t>(alloc.bytes));
  metrics_.registered_bytes.with({"host"}).inc(static_cast<double>(alloc.bytes));
  session->send(wire::AllocReply{alloc.request_id, Status::Ok(), id, alloc.bytes}, shared);
}

void Daemon::on_free(const std::shared_ptr<local::ClientSession>& session, const wire::FreeBuffer& free) {
  const std::uint64_t before = session->buffers.total_bytes();
  if (!session->buffers.release(free.buffer_id)) {
    RS_LOG(warn, "session") << "client " << session->id() << " freed unknown buffer "
                                 << free.buffer_id;
    metrics_.error(observe::ErrorKind::kInvalidArgument);
    return;
  }
  const std::uint64_t freed = before - session->buffers.total_bytes();
  if (auto job = jobs_.find(session->membership->job_id); job != jobs_.end())
    job->second.add_buffer_bytes(-static_cast<std::int64_t>(freed));
  metrics_.registered_bytes.with({"host"}).dec(static_cast<double>(freed));
}

void Daemon::on_keep_state(const std::shared_ptr<local::ClientSession>& session, const wire::KeepState& keep) {
  const auto& who = *session->membership;
  auto reply = [&](const Status& status) {
    if (!status.ok()) metrics_.error(observe::ErrorKind::kKeepState);
    session->send(wire::Completion{keep.request_id, status});
  };
  if (keep.name.size() > kMaxTensorName)
    return reply(Status::InvalidArgument("a kept state's name must be 1 to " + std::to_string(kMaxTensorName) +
                                         " bytes, got " + std::to_string(keep.name.size())));
  if (keep.bytes == 0) return reply(Status::InvalidArgument("state '" + keep.name + "': keep at least one byte"));
  auto buffer = session->buffers.resolve(wire::BufferRef{keep.buffer_id, 0}, keep.bytes, "kept state '" + keep.name + "'");
  if (!buffer.ok()) return reply(buffer.status());
  Status kept = kept_.keep({who.job_id, who.local_rank, keep.name}, buffer->keepalive, keep.bytes);
  if (kept.ok()) kept_.set_owner(who.job_id, session->credentials().uid);
  metrics_.kept_state_bytes.with().set(static_cast<double>(kept_.bytes()));
  if (kept.ok())
    RS_LOG(debug, "session") << "kept state '" << keep.name << "' of local rank " << who.local_rank << " of job '"
                             << who.job_id << "' (" << keep.bytes << " bytes)";
  reply(kept);
}

void Daemon::on_fetch_state(const std::shared_ptr<local::ClientSession>& session, const wire::FetchState& fetch) {
  const auto& who = *session->membership;
  auto kept = kept_.fetch({who.job_id, who.local_rank, fetch.name});
  if (!kept) {
    session->send(wire::AllocReply{fetch.request_id, Status::Ok(), 0, 0});
    return;
  }
  // A new buffer with a copy: the kept one's descriptor was closed once its
  // trainer had mapped it, and the state may be kept again while this one is read.
  auto region = session->buffers.allocate(kept->bytes, config_.max_client_buffer_bytes,
                                          "ringsync:" + who.job_id + ":" + std::to_string(who.local_rank) + ":state");
  if (!region.ok()) {
    metrics_.error(observe::ErrorKind::kAlloc);
    session->send(wire::AllocReply{fetch.request_id, region.status(), 0, 0});
    return;
  }
  auto [id, shared] = std::move(region).value();
  std::memcpy(shared->data(), kept->region->data(), kept->bytes);
  if (auto job = jobs_.find(who.job_id); job != jobs_.end())
    job->second.add_buffer_bytes(static_cast<std::int64_t>(kept->bytes));
  metrics_.registered_bytes.with({"host"}).inc(static_cast<double>(kept->bytes));
  RS_LOG(info, "session") << "local rank " << who.local_rank << " of job '" << who.job_id << "' fetched its kept state '"
                          << fetch.name << "' (" << kept->bytes << " bytes)";
  session->send(wire::AllocReply{fetch.request_id, Status::Ok(), id, kept->bytes}, shared);
}

Result<local::Submission> Daemon::prepare(const std::shared_ptr<local::ClientSession>& session, const local::Job& job,
                                   const cluster::JobRing* ring, wire::Collective request) {
  // The client library refuses longer names too; names travel between daemons
  // in bounded frames.
  if (request.name.empty() || request.name.size() > kMaxTensorName)
    return Status::InvalidArgument("tensor name must be 1 to " + std::to_string(kMaxTensorName) +
                                   " bytes, got " + std::to_string(request.name.size()));
  const std::uint32_t rank = session->membership->local_rank;
  const std::uint64_t elem = dtype_size(request.dtype);
  // Broadcast roots and allgather slots are global ranks: node-major.
  const std::uint64_t node = ring ? ring->node_rank() : 0;
  const std::uint64_t ranks = std::uint64_t{job.local_size()} * (ring ? ring->num_nodes() : 1);
  const std::uint64_t global_rank = node * job.local_size() + rank;
  if (overflows(request.count, elem, ranks))
    return Status::InvalidArgument("count " + std::to_string(request.count) + " is too large");
  const wire::KindTraits& kind = wire::traits(request.kind);
  const wire::Extent extent = wire::extent(request.kind, request.count, ranks);
  const bool reads = wire::reads_send(request.kind, global_rank, request.root);    // not: a non-root's broadcast, scatter
  const bool writes = wire::writes_recv(request.kind, global_rank, request.root);  // not: a non-root's reduce, gather
  const std::uint64_t send_bytes = reads ? extent.send * elem : 0;
  const std::uint64_t recv_bytes = writes ? extent.recv * elem : 0;
  if (kind.rooted && request.root >= ranks)
    return Status::InvalidArgument(std::string(kind.name) + " root " + std::to_string(request.root) +
                                   " is not a rank of job '" + job.id() + "' (size " + std::to_string(ranks) + ")");
  if (request.memory == wire::Memory::kDevice &&
      collective::kind_of(request.kind).staging() == collective::Staging::kUnserved)
    return Status::InvalidArgument(std::string(kind.name) + " of tensor '" + request.name +
                                   "': GPU buffers are not served for " + kind.name + " yet; pass host buffers");
  local::Submission s;
  local::ResolvedBuffer send, recv;
  if (request.memory == wire::Memory::kDevice) {
    auto send_device = session->devices.resolve(request.send, send_bytes, "send");
    if (!send_device.ok()) return send_device.status();
    auto recv_device = session->devices.resolve(request.recv, recv_bytes, "receive");
    if (!recv_device.ok()) return recv_device.status();
    if (send_device->data && recv_device->data && send_device->device != recv_device->device)
      return Status::InvalidArgument("tensor '" + request.name + "': the send buffer is on GPU " +
                                     std::to_string(send_device->device) +
                                     " and the receive buffer on GPU " +
                                     std::to_string(recv_device->device));
    send.data = send_device->data;
    recv.data = recv_device->data;
    s.device = recv_device->device;
    for (auto* d : {&*send_device, &*recv_device})
      if (d->keepalive) s.device_keepalive.push_back(std::move(d->keepalive));
  } else {
    auto send_host = session->buffers.resolve(request.send, send_bytes, "send");
    if (!send_host.ok()) return send_host.status();
    auto recv_host = session->buffers.resolve(request.recv, recv_bytes, "receive");
    if (!recv_host.ok()) return recv_host.status();
    send = std::move(send_host).value();
    recv = std::move(recv_host).value();
  }
  // A buffer the collective does not use is never touched, whatever was passed.
  if (!reads) send = {};
  if (!writes) recv = {};
  // In place means send == recv, except for allgather, where it means send is
  // this rank's own slot of recv, and reduce-scatter, where recv is this rank's
  // own slot of send. Any other overlap would read data already overwritten by
  // another rank's contribution. Alltoall has no in-place form: every rank's
  // output slot is another rank's input.
  const std::uint64_t slot = global_rank * request.count * elem;
  bool in_place = send.data == recv.data;
  if (kind.in_place == wire::InPlace::kSendIsOwnSlot) in_place = send.data == recv.data + slot;
  if (kind.in_place == wire::InPlace::kRecvIsOwnSlot) in_place = recv.data == send.data + slot;
  if (kind.in_place == wire::InPlace::kNever && recv_bytes > 0 &&
      (in_place || partially_overlap(send.data, send_bytes, recv.data, recv_bytes)))
    return Status::InvalidArgument(std::string(kind.name) + " of tensor '" + request.name +
                                   "': the send and receive buffers overlap; " + kind.name +
                                   " cannot run in place, pass a separate receive buffer");
  if (!in_place && partially_overlap(send.data, send_bytes, recv.data, recv_bytes))
    return Status::InvalidArgument("send and receive ranges of tensor '" + request.name +
                                   "' overlap without being in place");
  s.local_rank = rank;
  s.where = collective::Contribution{send.data, recv.data};
  if (send.keepalive) s.keepalive.push_back(std::move(send.keepalive));
  if (recv.keepalive) s.keepalive.push_back(std::move(recv.keepalive));
  s.submitted = Clock::now();
  std::weak_ptr<local::ClientSession> weak = session;
  const std::uint64_t request_id = request.request_id;
  s.complete = [weak, request_id](const Status& status) {
    if (auto live = weak.lock()) {
      live->liveness.outstanding.erase(request_id);
      live->send(wire::Completion{request_id, status});
    }
  };
  s.request = std::move(request);
  return s;
}

void Daemon::on_collective(const std::shared_ptr<local::ClientSession>& session,
                           wire::Collective request) {
  const auto reject = [&](const Status& status, observe::ErrorKind kind) {
    RS_LOG(info, "collective") << "client " << session->id() << ": tensor '" << request.name
                                    << "': " << status.to_string();
    metrics_.error(kind);
    session->send(wire::Completion{request.request_id, status});
  };
  auto job_it = jobs_.find(session->membership->job_id);
  if (job_it == jobs_.end()) return reject(Status::Internal("job vanished"), observe::ErrorKind::kInternal);
  local::Job& job = job_it->second;
  if (request.count <= route::kBusyPollBytes) busy_.extend_for(request.count * dtype_size(request.dtype));
  cluster::JobRing* ring = ring_of(job.id());
  auto submission = prepare(session, job, ring, request);
  if (!submission.ok()) return reject(submission.status(), observe::ErrorKind::kInvalidArgument);
  if (request.bounced)  // prepare() checked that count * element size does not overflow
    metrics_.staged_bytes.with().inc(static_cast<double>(request.count * dtype_size(request.dtype)));
  const std::uint64_t request_id = request.request_id;
  auto ready = job.submit(std::move(submission).value());
  if (!ready.ok())
    return reject(ready.status(), ready.status().code() == StatusCode::kPeerLost ? observe::ErrorKind::kPeerLost
                                                                                 : observe::ErrorKind::kInvalidArgument);
  session->liveness.outstanding.insert(request_id);
  if (!ready->has_value()) return;
  observe_rank_wait(**ready);
  if (!ring) {
    execute(std::move(**ready));
    return;
  }
  const wire::Collective& first = (*ready)->submissions.front().request;
  // Nothing to stage for an empty GPU collective: it goes around as host data,
  // so it needs no GPU on this node either.
  route::Query query;
  query.kind = first.kind;
  query.bytes = wire::extent(first.kind, first.count, 1).payload() * dtype_size(first.dtype);
  query.device = first.memory == wire::Memory::kDevice;
  if (!route::stages_through_host(query)) {
    ring->local_ready(std::move(**ready));
    return;
  }
  // GPU buffers go around the ring through host memory: staged first, onto
  // one carrier rank per node (DeviceStaging::host_contributions).
  Status agreed = local::check_agreement(**ready);
  if (!agreed.ok()) {
    RS_LOG(warn, "collective") << agreed.message();
    fail(**ready, agreed, observe::ErrorKind::kMismatch);
    return;
  }
  const device::NodeShape shape{ring->node_rank(), ring->num_nodes(), ring->slots()};
  devices().stage_in(std::move(**ready), shape, config_.cluster.gpu_staging_chunk_bytes,
                     [this, id = job.id()](local::PendingCollective& staged, const Status& s) {
    if (!s.ok()) return fail(staged, s, observe::ErrorKind::kDevice);
    cluster::JobRing* staged_ring = ring_of(id);
    if (!staged_ring || stopping_) return fail(staged, Status::Closed("the ring of job '" + id + "' is gone"), observe::ErrorKind::kShutdown);
    staged_ring->local_ready(std::move(staged));
  });
}

}  // namespace ringsync::service
