// What the daemon does with each message a trainer sends.
#include <variant>

#include "common/log.h"
#include "common/version.h"
#include "service/cluster/node_operation.h"
#include "service/daemon.h"
#include "service/device_service.h"

namespace ringsync::service {

namespace {

constexpr std::uint32_t kMaxLocalSize = 4096;
constexpr std::size_t kMaxTensorName = 4096;

// GPU buffers of a multi-node job reach the ring as one carrier rank per node
// holding the staged data, the other local ranks without buffers
// (DeviceStaging::host_contributions); NodeOperation says when it leaves such
// ranks out.
template <typename Operation>
constexpr bool skips_empty_contributions() {
  return requires { Operation::kSkipsEmptyContributions; };
}

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

Status Daemon::on_message(const std::shared_ptr<ClientSession>& session, wire::Message message) {
  if (auto* hello = std::get_if<wire::Hello>(&message)) return on_hello(session, *hello);
  if (!session->membership)
    return Status::ProtocolError("the first message on a connection must be a hello");
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
        } else {
          return Status::ProtocolError("a client may not send a reply message");
        }
      },
      message);
}

DeviceService& Daemon::devices() {
  if (!devices_) devices_ = std::make_shared<DeviceService>(io_, pool_, metrics_, cuda_backend());
  return *devices_;
}

Status Daemon::on_hello(const std::shared_ptr<ClientSession>& session, const wire::Hello& hello) {
  if (session->membership) return Status::ProtocolError("a second hello on one connection");
  auto refuse = [&](Status status) {
    RS_LOG(info, "session") << "client " << session->id() << " (pid " << hello.pid
                                 << ") refused: " << status.message();
    metrics_.error("hello_refused");
    session->send(wire::HelloReply{status, wire::kProtocolVersion, kVersion});
    session->close_after_flush();
    return Status::Ok();
  };
  if (hello.protocol_version != wire::kProtocolVersion)
    return refuse(Status::ProtocolError(
        "client protocol version " + std::to_string(hello.protocol_version) +
        " is not supported by ringsyncd " + kVersion + " (protocol " +
        std::to_string(wire::kProtocolVersion) + "); use a matching client library"));
  if (hello.local_size == 0 || hello.local_size > kMaxLocalSize)
    return refuse(Status::InvalidArgument("local size " + std::to_string(hello.local_size) +
                                          " is out of range [1, " + std::to_string(kMaxLocalSize) +
                                          "]"));
  if (hello.job_id.size() > 256)
    return refuse(Status::InvalidArgument("job id is longer than 256 bytes"));
  if (cluster_ && hello.job_id != cluster_->job_id())
    return refuse(Status::InvalidArgument(
        "this ringsyncd is node " + std::to_string(cluster_->node_rank()) + " of multi-node job '" +
        cluster_->job_id() + "', not job '" + hello.job_id + "'; set RINGSYNC_JOB_ID=" + cluster_->job_id()));
  if (cluster_ && hello.local_size != cluster_->slots())
    return refuse(Status::InvalidArgument(
        "multi-node job '" + cluster_->job_id() + "' has " + std::to_string(cluster_->slots()) +
        " slots per node but this client says local size " + std::to_string(hello.local_size) +
        "; set RINGSYNC_LOCAL_SIZE=" + std::to_string(cluster_->slots())));
  auto [it, created] = jobs_.try_emplace(hello.job_id, hello.job_id, hello.local_size);
  Status joined = it->second.join(hello.local_rank, hello.local_size, hello.pid);
  if (!joined.ok()) {
    if (created) jobs_.erase(it);
    return refuse(joined);
  }
  session->membership = ClientSession::Membership{hello.job_id, hello.local_rank, hello.pid};
  metrics_.jobs.with().set(static_cast<double>(jobs_.size()));
  RS_LOG(info, "session") << "client " << session->id() << " (pid " << hello.pid
                               << ") joined job '" << hello.job_id << "' as local rank "
                               << hello.local_rank << " of " << hello.local_size;
  wire::HelloReply reply{Status::Ok(), wire::kProtocolVersion, kVersion};
  if (cluster_) {
    reply.node_rank = cluster_->node_rank();
    reply.num_nodes = cluster_->num_nodes();
  }
  if (hello.shm_channel && config_.shm_channel) {
    if (Status opened = session->open_channel(); opened.ok()) {
      session->send_channel_offer(reply);
      channels_.push_back(session);
      return Status::Ok();
    } else {
      RS_LOG(warn, "session") << "client " << session->id() << ": no shared-memory channel ("
                              << opened.message() << "); its frames use the socket";
    }
  }
  session->send(reply);
  return Status::Ok();
}

void Daemon::on_alloc(const std::shared_ptr<ClientSession>& session,
                      const wire::AllocBuffer& alloc) {
  const auto& who = *session->membership;
  auto region = session->buffers.allocate(
      alloc.bytes, config_.max_client_buffer_bytes,
      "ringsync:" + who.job_id + ":" + std::to_string(who.local_rank));
  if (!region.ok()) {
    metrics_.error("alloc");
    session->send(wire::AllocReply{alloc.request_id, region.status(), 0, 0});
    return;
  }
  auto [id, shared] = std::move(region).value();
  metrics_.registered_bytes.with({"host"}).inc(static_cast<double>(alloc.bytes));
  session->send(wire::AllocReply{alloc.request_id, Status::Ok(), id, alloc.bytes}, shared);
}

void Daemon::on_free(const std::shared_ptr<ClientSession>& session, const wire::FreeBuffer& free) {
  const std::uint64_t before = session->buffers.total_bytes();
  if (!session->buffers.release(free.buffer_id)) {
    RS_LOG(warn, "session") << "client " << session->id() << " freed unknown buffer "
                                 << free.buffer_id;
    metrics_.error("invalid_argument");
    return;
  }
  metrics_.registered_bytes.with({"host"}).dec(
      static_cast<double>(before - session->buffers.total_bytes()));
}

Result<Submission> Daemon::prepare(const std::shared_ptr<ClientSession>& session, const Job& job,
                                   wire::Collective request) {
  // The client library refuses longer names too; names travel between daemons
  // in bounded frames.
  if (request.name.empty() || request.name.size() > kMaxTensorName)
    return Status::InvalidArgument("tensor name must be 1 to " + std::to_string(kMaxTensorName) +
                                   " bytes, got " + std::to_string(request.name.size()));
  const std::uint32_t rank = session->membership->local_rank;
  const std::uint64_t elem = dtype_size(request.dtype);
  // Broadcast roots and allgather slots are global ranks: node-major.
  const std::uint64_t node = cluster_ ? cluster_->node_rank() : 0;
  const std::uint64_t ranks = job.local_size() * (cluster_ ? cluster_->num_nodes() : 1);
  const std::uint64_t global_rank = node * job.local_size() + rank;
  if (overflows(request.count, elem, ranks))
    return Status::InvalidArgument("count " + std::to_string(request.count) + " is too large");
  std::uint64_t send_bytes = request.count * elem;
  std::uint64_t recv_bytes = send_bytes;
  switch (request.kind) {
    case wire::CollectiveKind::kAllreduce: break;
    case wire::CollectiveKind::kBroadcast:
      if (request.root >= ranks)
        return Status::InvalidArgument("broadcast root " + std::to_string(request.root) +
                                       " is not a rank of job '" + job.id() + "' (size " +
                                       std::to_string(ranks) + ")");
      if (request.root != global_rank) send_bytes = 0;  // only the root's data is read
      break;
    case wire::CollectiveKind::kAllgather: recv_bytes = send_bytes * ranks; break;
    case wire::CollectiveKind::kBarrier: send_bytes = recv_bytes = 0; break;
  }
  Submission s;
  ResolvedBuffer send, recv;
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
  const bool in_place_allgather = request.kind == wire::CollectiveKind::kAllgather &&
                                  send.data == recv.data + global_rank * send_bytes;
  // In place means send == recv, except for allgather, where it means send is
  // this rank's own slot of recv. Any other overlap would read data already
  // overwritten by another rank's contribution.
  const bool in_place = request.kind == wire::CollectiveKind::kAllgather
                            ? in_place_allgather
                            : send.data == recv.data;
  if (!in_place && partially_overlap(send.data, send_bytes, recv.data, recv_bytes))
    return Status::InvalidArgument("send and receive ranges of tensor '" + request.name +
                                   "' overlap without being in place");
  s.local_rank = rank;
  s.where = Contribution{send.data, recv.data};
  if (send.keepalive) s.keepalive.push_back(std::move(send.keepalive));
  if (recv.keepalive) s.keepalive.push_back(std::move(recv.keepalive));
  s.submitted = Clock::now();
  std::weak_ptr<ClientSession> weak = session;
  const std::uint64_t request_id = request.request_id;
  s.complete = [weak, request_id](const Status& status) {
    if (auto live = weak.lock()) live->send(wire::Completion{request_id, status});
  };
  s.request = std::move(request);
  return s;
}

void Daemon::on_collective(const std::shared_ptr<ClientSession>& session,
                           wire::Collective request) {
  const auto reject = [&](const Status& status, std::string_view kind) {
    RS_LOG(info, "collective") << "client " << session->id() << ": tensor '" << request.name
                                    << "': " << status.to_string();
    metrics_.error(kind);
    session->send(wire::Completion{request.request_id, status});
  };
  auto job_it = jobs_.find(session->membership->job_id);
  if (job_it == jobs_.end()) return reject(Status::Internal("job vanished"), "internal");
  Job& job = job_it->second;
  if (request.count <= BusyPoll::kSmallBytes) busy_.extend_for(request.count * dtype_size(request.dtype));
  auto submission = prepare(session, job, request);
  if (!submission.ok()) return reject(submission.status(), "invalid_argument");
  if (request.staged)  // prepare() checked that count * element size does not overflow
    metrics_.staged_bytes.with().inc(static_cast<double>(request.count * dtype_size(request.dtype)));
  auto ready = job.submit(std::move(submission).value());
  if (!ready.ok())
    return reject(ready.status(), ready.status().code() == StatusCode::kPeerLost
                                      ? "peer_lost"
                                      : "invalid_argument");
  if (!ready->has_value()) return;
  observe_rank_wait(**ready);
  if (!cluster_) {
    execute(std::move(**ready));
    return;
  }
  const wire::Collective& first = (*ready)->submissions.front().request;
  // Nothing to stage for an empty GPU collective: it goes around as host data,
  // so it needs no GPU on this node either.
  if (first.memory != wire::Memory::kDevice || first.count == 0 ||
      first.kind == wire::CollectiveKind::kBarrier) {
    cluster_->local_ready(std::move(**ready));
    return;
  }
  // GPU buffers go around the ring through host memory: staged first.
  if constexpr (!skips_empty_contributions<cluster::NodeOperation>()) {
    return fail(**ready,
                Status::InvalidArgument("tensor '" + (*ready)->name +
                                        "': GPU buffers in multi-node jobs need a ringsyncd "
                                        "whose ring path accepts staged GPU data; pass host "
                                        "memory, or run one node"),
                "device");
  }
  Status agreed = check_agreement(**ready);
  if (!agreed.ok()) {
    RS_LOG(warn, "collective") << agreed.message();
    fail(**ready, agreed, "mismatch");
    return;
  }
  const NodeShape shape{cluster_->node_rank(), cluster_->num_nodes(), cluster_->slots()};
  devices().stage_in(std::move(**ready), shape, [this](PendingCollective& staged, const Status& s) {
    if (!s.ok()) return fail(staged, s, "device");
    if (!cluster_) return fail(staged, Status::Closed("ringsyncd is shutting down"), "shutdown");
    cluster_->local_ready(std::move(staged));
  });
}

void Daemon::on_disconnect(const std::shared_ptr<ClientSession>& session) {
  if (sessions_.erase(session->id()) == 0) return;  // already handled
  std::erase(channels_, session);
  if (stopping_ && sessions_.empty()) io_.stop();
  metrics_.clients.with().set(static_cast<double>(sessions_.size()));
  metrics_.registered_bytes.with({"host"}).dec(static_cast<double>(session->buffers.total_bytes()));
  session->buffers.clear();
  if (devices_) devices_->forget(*session);
  session->close_after_flush();
  if (!session->membership) return;
  const auto& who = *session->membership;
  RS_LOG(info, "session") << "client " << session->id() << " (pid " << who.pid
                               << ", local rank " << who.local_rank << " of job '" << who.job_id
                               << "') disconnected";
  auto job_it = jobs_.find(who.job_id);
  if (job_it == jobs_.end()) return;
  Job& job = job_it->second;
  auto orphaned = job.leave(who.local_rank);
  for (auto& pending : orphaned) {
    fail(pending,
         Status::PeerLost("local rank " + std::to_string(who.local_rank) + " (pid " +
                          std::to_string(who.pid) + ") of job '" + who.job_id +
                          "' disconnected while tensor '" + pending.name + "' was pending"),
         "client_lost");
  }
  if (cluster_ && (!orphaned.empty() || cluster_->has_waiting())) {
    const std::uint32_t global = cluster_->node_rank() * cluster_->slots() + who.local_rank;
    cluster_->abandon_job(Status::PeerLost(
        "rank " + std::to_string(global) + " (node " + std::to_string(cluster_->node_rank()) +
        ", local rank " + std::to_string(who.local_rank) + ", pid " + std::to_string(who.pid) +
        ") of job '" + who.job_id + "' disconnected with collectives unfinished"));
  }
  if (job.connected() == 0) jobs_.erase(job_it);
  metrics_.jobs.with().set(static_cast<double>(jobs_.size()));
}

}  // namespace ringsync::service
