#include "client/src/context.h"

#include <unistd.h>

#include "common/log.h"

namespace ringsync::client {
namespace {

Status handshake_failure(const Status& why, const std::string& path) {
  switch (why.code()) {
    case StatusCode::kTimeout:
      return Status::Closed(
          "ringsyncd at " + path +
          " accepted the connection but did not answer the hello: " + why.message());
    case StatusCode::kClosed:
      return Status::Closed("no answer to the hello: " + why.message() +
                            "; check the daemon's log");
    case StatusCode::kProtocolError:
      return Status::ProtocolError(why.message() + "; is " + path +
                                   " a ringsyncd socket of a compatible version?");
    default: return why;
  }
}

}  // namespace

Result<std::unique_ptr<Context>> Context::connect(const Settings& settings,
                                                  std::shared_ptr<DeviceMemory> device) {
  auto connection = Connection::open(settings.socket_path, settings.connect_timeout);
  if (!connection.ok()) return connection.status();
  Connection& conn = **connection;

  wire::Hello hello;
  hello.job_id = settings.job_id;
  hello.local_rank = static_cast<std::uint32_t>(settings.local_rank);
  hello.local_size = static_cast<std::uint32_t>(settings.local_size);
  hello.pid = static_cast<std::int32_t>(getpid());
  hello.shm_channel = settings.shm_channel;
  hello.num_nodes = static_cast<std::uint32_t>(settings.num_nodes);
  hello.node_rank = settings.node_rank;
  hello.nodes = settings.nodes;
  hello.rendezvous = settings.rendezvous;
  hello.job_token = settings.job_token;
  hello.min_nodes = static_cast<std::uint32_t>(settings.min_nodes);
  hello.max_nodes = static_cast<std::uint32_t>(settings.max_nodes);
  if (Status s = conn.send(hello); !s.ok()) return handshake_failure(s, settings.socket_path);

  // A job found through a rendezvous store is answered once this node is
  // registered there: the daemon bounds that by its --join-timeout. A node of
  // an elastic job may be a spare, answered once a run needs it.
  const bool rendezvous = settings.num_nodes > 1 && settings.nodes.empty();
  const auto answer_within = settings.connect_timeout + (settings.max_nodes > 0 ? std::chrono::minutes(60)
                                                         : rendezvous           ? std::chrono::minutes(5)
                                                                                : std::chrono::minutes(0));
  auto answer = conn.receive(static_cast<int>(answer_within.count()));
  if (!answer.ok()) return handshake_failure(answer.status(), settings.socket_path);
  const auto* reply = std::get_if<wire::HelloReply>(&*answer);
  if (!reply)
    return Status::ProtocolError("ringsyncd at " + settings.socket_path +
                                 " answered the hello with another message; is it a ringsyncd "
                                 "socket of a compatible version?");
  if (!reply->status.ok()) return reply->status;
  if (reply->protocol_version != wire::kProtocolVersion)
    return Status::ProtocolError(
        "ringsyncd at " + settings.socket_path + " speaks protocol version " +
        std::to_string(reply->protocol_version) + ", this library speaks " +
        std::to_string(wire::kProtocolVersion) + "; use a client library matching the daemon");

  if (reply->channel_bytes > 0) {
    if (!settings.shm_channel)
      return Status::ProtocolError("ringsyncd at " + settings.socket_path +
                                   " offered a shared-memory channel nobody asked for");
    if (Status s = conn.attach_channel(conn.take_fd(), reply->channel_bytes); !s.ok())
      return Status(s.code(), "cannot use the shared-memory channel of ringsyncd at " + settings.socket_path +
                                  ": " + s.message());
  }
  RS_LOG(debug, "client") << "rank " << settings.local_rank << "/" << settings.local_size
                          << " of job '" << settings.job_id << "' connected to ringsyncd "
                          << reply->daemon_version << " at " << settings.socket_path
                          << (settings.nodes.empty() ? "" : "; nodes " + settings.nodes + " (" + settings.nodes_from + ")");
  auto context = std::unique_ptr<Context>(
      new Context(settings, std::move(*connection), reply->daemon_version, std::move(device)));
  context->node_rank_ = static_cast<int>(reply->node_rank);
  context->num_nodes_ = static_cast<int>(reply->num_nodes);
  context->progress_->set_heartbeat(std::chrono::milliseconds(reply->heartbeat_ms));
  return context;
}

Context::Context(Settings settings, std::unique_ptr<Connection> connection,
                 std::string daemon_version, std::shared_ptr<DeviceMemory> device)
    : settings_(std::move(settings)),
      connection_(std::move(connection)),
      daemon_version_(std::move(daemon_version)),
      device_(std::move(device)),
      progress_(std::make_shared<Progress>(
          *connection_, settings_.busy_poll, [this](wire::Message& m) { return dispatch(m); },
          [this](const Status& why) { finish(why); })) {}

Context::~Context() {
  Status why;
  bool open = false;
  {
    std::lock_guard lock(mu_);
    open = !closed_;
    if (!closed_) closed_ = Status::Closed("the connection was closed by rs_disconnect()");
    why = *closed_;
  }
  // The daemon tells the job's other ranks this one left on purpose.
  if (open) (void)connection_->send(wire::Leave{"rs_disconnect"});
  connection_->shutdown();  // a thread reading now gets out
  progress_->detach();
  finish(why);
}

void Context::await_reply(const std::function<bool()>& done) {
  progress_->drive(
      [&] {
        std::lock_guard lock(mu_);
        return done();
      },
      std::nullopt);
  std::unique_lock lock(mu_);
  alloc_cv_.wait(lock, done);
}

// ---- buffers ----------------------------------------------------------------

Result<Context::IssuedBuffer> Context::allocate_buffer(std::size_t bytes) {
  const std::uint64_t id = next_request_id_++;
  auto wait = std::make_shared<PendingAlloc>();
  wait->bytes = bytes;
  {
    std::lock_guard lock(mu_);
    if (closed_) return *closed_;
    pending_.emplace(id, wait);
  }
  if (Status s = connection_->send(wire::AllocBuffer{id, bytes}); !s.ok()) fail_connection(s);
  await_reply([&] { return wait->done; });
  std::lock_guard lock(mu_);
  return std::move(*wait->result);
}

Result<void*> Context::alloc(std::size_t bytes) {
  if (bytes == 0)
    return Status::InvalidArgument("rs_alloc: 0 bytes requested; ask for at least one byte");
  auto issued = allocate_buffer(bytes);
  if (!issued.ok()) return issued.status();
  return buffers_.add(issued->buffer_id, std::move(issued->memory), bytes);
}

Status Context::free(void* ptr) {
  auto id = buffers_.remove(ptr);
  if (!id.ok()) return id.status();
  send_free(*id);
  return Status::Ok();
}

void Context::send_free(std::uint32_t buffer_id) {
  {
    std::lock_guard lock(mu_);
    if (closed_) return;  // the daemon releases everything of a closed connection
  }
  if (Status s = connection_->send(wire::FreeBuffer{buffer_id}); !s.ok()) fail_connection(s);
}

Result<BounceBuffer> Context::acquire_bounce(std::size_t bytes) {
  const auto size_class = BouncePool::size_class(bytes);
  if (!size_class)
    return Status::OutOfMemory("cannot stage " + std::to_string(bytes) +
                               " bytes; use a buffer from rs_alloc() instead");
  if (auto idle = pool_.take(*size_class)) return std::move(*idle);
  auto issued = allocate_buffer(*size_class);
  if (!issued.ok()) return issued.status();
  return BounceBuffer{issued->buffer_id, *size_class, std::move(issued->memory)};
}

void Context::release(PendingCollective& pending) {
  for (std::uint32_t id : pending.pinned) buffers_.unpin(id);
  pending.pinned.clear();
  for (std::uint32_t id : pending.device_pinned) devices_.unpin(id);
  pending.device_pinned.clear();
  if (!pending.bounce) return;
  auto surplus = pool_.give_back(std::move(*pending.bounce));
  pending.bounce.reset();
  if (surplus) send_free(surplus->buffer_id);
}

// ---- collectives ------------------------------------------------------------

Result<std::shared_ptr<RequestState>> Context::submit(const CollectiveCall& call) {
  // Roots, allgather sizes and in-place slots are in global ranks.
  auto bytes = validate(call, rank(), size());
  if (!bytes.ok()) return bytes.status();
  {
    std::lock_guard lock(mu_);
    if (closed_) return *closed_;
  }
  // Completions that arrived meanwhile release their buffers before this
  // request looks for some (requests nobody waits for complete here).
  progress_->poll();
  auto device = locate_device(call, *bytes);
  if (!device.ok()) return device.status();
  if (device->has_value()) return submit_device(call, **device);

  auto placement = place(call, *bytes, rank(),
                         [this](const void* p, std::size_t n) { return buffers_.find(p, n); });
  if (!placement.ok()) return placement.status();

  PendingCollective pending;
  pending.placement = std::move(*placement);
  const Placement& where = pending.placement;
  if (where.bounce_bytes > 0) {
    auto bounce = acquire_bounce(where.bounce_bytes);
    if (!bounce.ok()) return bounce.status();
    pending.bounce = std::move(*bounce);
  }
  const std::uint32_t bounce_id = pending.bounce ? pending.bounce->buffer_id : 0;
  apply_copy_in(where, pending.bounce ? pending.bounce->region.data() : nullptr);

  wire::Collective message = to_message(call, next_request_id_++);
  message.send = buffer_ref(where.send, bounce_id);
  message.recv = buffer_ref(where.recv, bounce_id);
  message.bounced = where.bounced();

  for (const Location* l : {&where.send, &where.recv}) {
    if (l->where != Location::Where::kShared) continue;
    const std::uint32_t id = l->shared.buffer_id;
    if (!pending.pinned.empty() && pending.pinned.front() == id) continue;  // in place
    buffers_.pin(id);
    pending.pinned.push_back(id);
  }
  return send_collective(std::move(message), std::move(pending));
}

Result<std::shared_ptr<RequestState>> Context::send_collective(wire::Collective message,
                                                               PendingCollective pending) {
  // A collective of a few KiB is answered in microseconds (the daemons'
  // small-allreduce paths); a larger one keeps the daemon busy for longer.
  const std::uint64_t bytes = message.count * dtype_size(message.dtype);
  pending.state = std::make_shared<RequestState>(message.request_id, progress_, bytes <= kSoonBytes);
  auto state = pending.state;
  {
    std::unique_lock lock(mu_);
    if (closed_) {
      Status why = *closed_;
      lock.unlock();
      release(pending);
      return why;
    }
    pending_.emplace(message.request_id, std::move(pending));
  }
  // On failure the connection is dead: the next read completes the request.
  if (Status s = connection_->send(message); !s.ok()) fail_connection(s);
  return state;
}

// ---- answers -----------------------------------------------------------------

Status Context::dispatch(wire::Message& message) {
  if (const auto* reply = std::get_if<wire::AllocReply>(&message)) return on_alloc_reply(*reply);
  if (const auto* done = std::get_if<wire::Completion>(&message)) return on_completion(*done);
  if (const auto* registered = std::get_if<wire::RegisterDeviceReply>(&message))
    return on_register_reply(*registered);
  if (const auto* waiting = std::get_if<wire::NodesWaitingReply>(&message)) {
    std::lock_guard lock(mu_);
    auto it = pending_.find(waiting->request_id);
    if (it == pending_.end() || !std::holds_alternative<std::shared_ptr<PendingRegistration>>(it->second))
      return Status::ProtocolError("ringsyncd answered a question " + std::to_string(waiting->request_id) +
                                   " that was never asked");
    auto wait = std::get<std::shared_ptr<PendingRegistration>>(it->second);
    pending_.erase(it);
    wait->value = waiting->waiting;
    wait->done = true;
    alloc_cv_.notify_all();
    return Status::Ok();
  }
  return Status::ProtocolError("ringsyncd sent a message a client never expects (type index " +
                               std::to_string(message.index()) + ")");
}

Status Context::on_alloc_reply(const wire::AllocReply& reply) {
  std::shared_ptr<PendingAlloc> wait;
  {
    std::lock_guard lock(mu_);
    auto it = pending_.find(reply.request_id);
    if (it == pending_.end() || !std::holds_alternative<std::shared_ptr<PendingAlloc>>(it->second))
      return Status::ProtocolError("ringsyncd answered an allocation " +
                                   std::to_string(reply.request_id) + " that was never requested");
    wait = std::get<std::shared_ptr<PendingAlloc>>(it->second);
  }
  std::optional<Result<IssuedBuffer>> result;
  if (!reply.status.ok()) {
    result = reply.status;
  } else if (wait->fetch && reply.buffer_id == 0) {
    result = IssuedBuffer{};  // nothing kept under that name
  } else {
    const int fd = connection_->take_fd();
    if (fd < 0)
      return Status::ProtocolError("ringsyncd granted buffer " + std::to_string(reply.buffer_id) +
                                   " without passing its memory (no file descriptor)");
    if (reply.buffer_id == 0 || reply.bytes < wait->bytes) {
      close(fd);
      return Status::ProtocolError("ringsyncd granted buffer " + std::to_string(reply.buffer_id) +
                                   " of " + std::to_string(reply.bytes) +
                                   " bytes for a request of " + std::to_string(wait->bytes) +
                                   " bytes");
    }
    auto memory = shm::Region::map(fd, reply.bytes);
    if (memory.ok()) {
      result = IssuedBuffer{reply.buffer_id, std::move(*memory)};
    } else {
      result = memory.status();
      send_free(reply.buffer_id);
    }
  }
  {
    std::lock_guard lock(mu_);
    pending_.erase(reply.request_id);
    wait->result = std::move(result);
    wait->done = true;
  }
  alloc_cv_.notify_all();
  return Status::Ok();
}

Status Context::on_completion(const wire::Completion& completion) {
  PendingCollective pending;
  {
    std::lock_guard lock(mu_);
    auto it = pending_.find(completion.request_id);
    if (it != pending_.end() && std::holds_alternative<std::shared_ptr<PendingRegistration>>(it->second)) {
      // A request answered by its status alone (KeepState).
      auto wait = std::get<std::shared_ptr<PendingRegistration>>(it->second);
      pending_.erase(it);
      wait->result = completion.status;
      wait->done = true;
      alloc_cv_.notify_all();
      return Status::Ok();
    }
    if (it == pending_.end() || !std::holds_alternative<PendingCollective>(it->second))
      return Status::ProtocolError("ringsyncd completed a collective " +
                                   std::to_string(completion.request_id) +
                                   " that was never submitted");
    pending = std::move(std::get<PendingCollective>(it->second));
    pending_.erase(it);
  }
  // The result is out and the buffers are released before a waiter wakes: it may
  // free a buffer or reuse the bounce buffer right away.
  pending.state->complete(completion.status, [&](bool deliver) {
    if (deliver && pending.bounce)
      apply_copy_out(pending.placement, pending.bounce->region.data());
    release(pending);
  });
  return Status::Ok();
}

void Context::fail_connection(const Status& why) {
  {
    std::lock_guard lock(mu_);
    if (!closed_) closed_ = why;
  }
  connection_->shutdown();
}

void Context::finish(const Status& why) {
  std::unordered_map<std::uint64_t, Pending> orphans;
  Status reason;
  {
    std::lock_guard lock(mu_);
    if (!closed_) closed_ = why;
    reason = *closed_;
    orphans.swap(pending_);
    for (auto& [id, pending] : orphans) {
      if (auto* wait = std::get_if<std::shared_ptr<PendingAlloc>>(&pending)) {
        (*wait)->result = reason;
        (*wait)->done = true;
      }
      if (auto* wait = std::get_if<std::shared_ptr<PendingRegistration>>(&pending)) {
        (*wait)->result = reason;
        (*wait)->done = true;
      }
    }
  }
  alloc_cv_.notify_all();
  for (auto& [id, pending] : orphans) {
    if (auto* collective = std::get_if<PendingCollective>(&pending))
      collective->state->complete(reason, [&](bool) { release(*collective); });
  }
}

}  // namespace ringsync::client
