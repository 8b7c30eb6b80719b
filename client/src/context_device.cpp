// Collectives on GPU memory. The CUDA driver of the process tells device
// pointers apart; each allocation holding one is registered with the daemon
// once (its IPC handle, under an id chosen here) and then named by id and
// offset. Before a collective is sent, the device work queued on its buffers
// is waited for, so the daemon reads finished data (docs/gpu-buffers.md).
#include <sstream>

#include "client/src/context.h"
#include "common/log.h"

namespace ringsync::client {
namespace {

std::string pointer_text(const void* p) {
  std::ostringstream s;
  s << p;
  return s.str();
}

std::string call_name(const CollectiveCall& call) {
  return std::string(wire::collective_kind_name(call.kind)) + " '" + call.name + "'";
}

// Ok when [ptr, ptr + bytes) lies inside the allocation.
Status check_inside(const DeviceAllocation& a, const void* ptr, std::size_t bytes,
                    const std::string& what) {
  const auto p = reinterpret_cast<std::uintptr_t>(ptr);
  if (p < a.base || p - a.base > a.bytes || bytes > a.bytes - (p - a.base))
    return Status::InvalidArgument(what + ": " + std::to_string(bytes) + " bytes at " +
                                   pointer_text(ptr) + " run past the end of their GPU allocation (" +
                                   std::to_string(a.bytes) + " bytes at " +
                                   pointer_text(reinterpret_cast<const void*>(a.base)) + ")");
  return Status::Ok();
}

Result<std::optional<DeviceAllocation>> locate(DeviceMemory& device, const void* ptr,
                                               const std::string& what) {
  auto found = device.locate(ptr);
  if (!found.ok())
    return Status(found.status().code(), what + ": " + found.status().message());
  return found;
}

}  // namespace

Result<std::optional<Context::DeviceBuffers>> Context::locate_device(const CollectiveCall& call,
                                                                     const CallBytes& bytes) {
  if (bytes.recv == 0 && bytes.send == 0) return std::optional<DeviceBuffers>();  // no memory is touched
  const std::string what = call_name(call);
  if (bytes.recv == 0) {  // a non-root's reduce or gather: an input only
    auto send = locate(*device_, call.send, what + ": sendbuf");
    if (!send.ok()) return send.status();
    if (!send->has_value()) return std::optional<DeviceBuffers>();
    return Status::InvalidArgument(what + ": GPU buffers are not served for " +
                                   wire::collective_kind_name(call.kind) + " yet; pass host buffers");
  }
  auto recv = locate(*device_, call.recv, what + ": recvbuf");
  if (!recv.ok()) return recv.status();
  const bool has_send = bytes.send > 0;
  std::optional<DeviceAllocation> send;
  if (has_send) {
    auto found = locate(*device_, call.send, what + ": sendbuf");
    if (!found.ok()) return found.status();
    send = *found;
  }
  if (!recv->has_value() && !send) return std::optional<DeviceBuffers>();
  // The daemon moves a rank's data in one place, host or device; a copy the
  // caller makes is cheaper than any the library could guess at.
  if (!recv->has_value() || (has_send && !send))
    return Status::InvalidArgument(
        what + ": " + (send ? "sendbuf" : "recvbuf") + " is GPU memory but " +
        (send ? "recvbuf" : "sendbuf") +
        " is host memory; pass both buffers on the GPU or both on the host");
  if (send && send->device != (*recv)->device)
    return Status::InvalidArgument(what + ": sendbuf is on GPU " + std::to_string(send->device) +
                                   " but recvbuf on GPU " + std::to_string((*recv)->device) +
                                   "; pass both buffers on the same GPU");
  RINGSYNC_RETURN_IF_ERROR(check_inside(**recv, call.recv, bytes.recv, what + ": recvbuf"));
  if (send)
    RINGSYNC_RETURN_IF_ERROR(check_inside(*send, call.send, bytes.send, what + ": sendbuf"));
  return std::optional<DeviceBuffers>(DeviceBuffers{send, **recv});
}

Result<std::shared_ptr<RequestState>> Context::submit_device(const CollectiveCall& call,
                                                             const DeviceBuffers& buffers) {
  auto recv_id = registered_id(buffers.recv);
  if (!recv_id.ok()) return recv_id.status();
  std::optional<std::uint32_t> send_id;
  if (buffers.send) {
    auto id = registered_id(*buffers.send);
    if (!id.ok()) return id.status();
    send_id = *id;
  }
  // Every rank's buffers are read and written once all ranks have submitted,
  // without any ordering against the caller's streams: what was queued on them
  // must be finished now.
  if (Status s = device_->synchronize(buffers.recv, device_stream_.load()); !s.ok())
    return Status(s.code(), call_name(call) + ": " + s.message());

  wire::Collective message = to_message(call, next_request_id_++);
  message.memory = wire::Memory::kDevice;
  const auto offset = [](const void* p, const DeviceAllocation& a) {
    return static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(p) - a.base);
  };
  message.recv = wire::BufferRef{*recv_id, offset(call.recv, buffers.recv)};
  if (send_id) message.send = wire::BufferRef{*send_id, offset(call.send, *buffers.send)};

  PendingCollective pending;
  for (std::uint32_t id : {*recv_id, send_id.value_or(*recv_id)}) {
    if (!pending.device_pinned.empty() && pending.device_pinned.front() == id) continue;
    devices_.pin(id);
    pending.device_pinned.push_back(id);
  }
  return send_collective(std::move(message), std::move(pending));
}

Result<std::uint32_t> Context::registered_id(const DeviceAllocation& allocation) {
  if (auto id = devices_.find(allocation)) return *id;
  std::lock_guard registering(register_mu_);
  if (auto id = devices_.find(allocation)) return *id;
  // Memory freed and allocated again: the old registration names memory that is gone.
  for (std::uint32_t stale : devices_.take_stale(allocation)) send_unregister(stale);
  if (devices_.size() >= DeviceRegistry::kMaxAllocations) return DeviceRegistry::too_many();
  const std::uint32_t id = devices_.next_id();
  RINGSYNC_RETURN_IF_ERROR(send_registration(id, allocation));
  if (Status added = devices_.add(id, allocation); !added.ok()) {
    send_unregister(id);
    return added;
  }
  return id;
}

Status Context::send_registration(std::uint32_t id, const DeviceAllocation& allocation) {
  auto exported = device_->export_allocation(allocation);
  if (!exported.ok()) return exported.status();
  wire::RegisterDevice message;
  message.request_id = next_request_id_++;
  message.allocation_id = id;
  message.ipc_handle = exported->handle;
  message.device = allocation.device;
  message.device_uuid = exported->uuid;
  message.bytes = allocation.bytes;

  auto wait = std::make_shared<PendingRegistration>();
  {
    std::lock_guard lock(mu_);
    if (closed_) return *closed_;
    pending_.emplace(message.request_id, wait);
  }
  if (Status s = connection_->send(message); !s.ok()) fail_connection(s);
  await_reply([&] { return wait->done; });
  std::lock_guard lock(mu_);
  if (!wait->result.ok()) {
    RS_LOG(info, "client") << "ringsyncd refused the GPU allocation of " << allocation.bytes
                           << " bytes on GPU " << allocation.device << ": "
                           << wait->result.message();
  }
  return wait->result;
}

Status Context::on_register_reply(const wire::RegisterDeviceReply& reply) {
  std::shared_ptr<PendingRegistration> wait;
  {
    std::lock_guard lock(mu_);
    auto it = pending_.find(reply.request_id);
    if (it == pending_.end() ||
        !std::holds_alternative<std::shared_ptr<PendingRegistration>>(it->second))
      return Status::ProtocolError("ringsyncd answered a GPU registration " +
                                   std::to_string(reply.request_id) + " that was never sent");
    wait = std::get<std::shared_ptr<PendingRegistration>>(it->second);
    pending_.erase(it);
    wait->result = reply.status;
    wait->done = true;
  }
  alloc_cv_.notify_all();
  return Status::Ok();
}

void Context::send_unregister(std::uint32_t id) {
  {
    std::lock_guard lock(mu_);
    if (closed_) return;  // the daemon unmaps everything of a closed connection
  }
  if (Status s = connection_->send(wire::UnregisterDevice{id}); !s.ok()) fail_connection(s);
}

Status Context::register_device(const void* ptr, std::size_t bytes) {
  if (!ptr) return Status::InvalidArgument("rs_register_device: ptr is NULL");
  {
    std::lock_guard lock(mu_);
    if (closed_) return *closed_;
  }
  auto found = locate(*device_, ptr, "rs_register_device");
  if (!found.ok()) return found.status();
  if (!found->has_value())
    return Status::InvalidArgument(
        "rs_register_device: " + pointer_text(ptr) +
        " is not GPU memory as this process's CUDA driver sees it (host or managed memory, or "
        "no CUDA driver loaded); host memory needs no registration");
  RINGSYNC_RETURN_IF_ERROR(check_inside(**found, ptr, bytes, "rs_register_device"));
  auto id = registered_id(**found);
  return id.ok() ? Status::Ok() : id.status();
}

Status Context::unregister_device(const void* ptr) {
  auto id = devices_.remove(ptr);
  if (!id.ok()) return Status(id.status().code(), "rs_unregister_device: " + id.status().message());
  send_unregister(*id);
  return Status::Ok();
}

}  // namespace ringsync::client
