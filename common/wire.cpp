#include "common/wire.h"

#include <flatbuffers/flatbuffers.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "ringsync/wire/client_generated.h"

namespace ringsync::wire {
namespace fb = ringsync::wire::client;

const char* memory_name(Memory memory) {
  switch (memory) {
    case Memory::kHost: return "host";
    case Memory::kDevice: return "device";
  }
  return "invalid";
}

namespace {

constexpr std::uint8_t kMaxStatusCode = static_cast<std::uint8_t>(StatusCode::kInternal);

fb::StatusCode to_fb(StatusCode c) { return static_cast<fb::StatusCode>(c); }
fb::BufferRef to_fb(const BufferRef& r) { return fb::BufferRef(r.buffer_id, r.offset); }
BufferRef from_fb(const fb::BufferRef* r) {
  return r ? BufferRef{r->buffer_id(), r->offset()} : BufferRef{};
}
std::string str(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

template <std::size_t N>
flatbuffers::Offset<flatbuffers::Vector<std::uint8_t>> bytes_of(flatbuffers::FlatBufferBuilder& b,
                                                                const std::array<std::byte, N>& a) {
  return b.CreateVector(reinterpret_cast<const std::uint8_t*>(a.data()), N);
}

bool all_zero(const DeviceUuid& uuid) {
  for (std::byte b : uuid)
    if (b != std::byte{0}) return false;
  return true;
}

// The status a peer reported, or nullopt when its code is unknown.
std::optional<Status> status_from(fb::StatusCode code, const flatbuffers::String* message) {
  auto raw = static_cast<std::uint8_t>(code);
  if (raw > kMaxStatusCode) return std::nullopt;
  return Status(static_cast<StatusCode>(raw), str(message));
}

Status unknown_status(fb::StatusCode code) {
  return Status::ProtocolError("unknown status code " + std::to_string(static_cast<int>(code)));
}

struct Encoder {
  flatbuffers::FlatBufferBuilder& b;

  std::pair<fb::Body, flatbuffers::Offset<void>> operator()(const Hello& m) {
    auto job = b.CreateString(m.job_id);
    auto nodes = b.CreateString(m.nodes);
    auto rendezvous = b.CreateString(m.rendezvous);
    auto token = b.CreateString(m.job_token);
    return {fb::Body::Hello, fb::CreateHello(b, m.protocol_version, job, m.local_rank, m.local_size, m.pid,
                                             m.shm_channel, m.num_nodes, m.node_rank, nodes, rendezvous, token,
                                             m.min_nodes, m.max_nodes)
                                 .Union()};
  }
  std::pair<fb::Body, flatbuffers::Offset<void>> operator()(const HelloReply& m) {
    auto msg = b.CreateString(m.status.message());
    auto version = b.CreateString(m.daemon_version);
    return {fb::Body::HelloReply,
            fb::CreateHelloReply(b, to_fb(m.status.code()), msg, m.protocol_version, version,
                                 m.node_rank, m.num_nodes, m.channel_bytes, m.heartbeat_ms)
                .Union()};
  }
  std::pair<fb::Body, flatbuffers::Offset<void>> operator()(const AllocBuffer& m) {
    return {fb::Body::AllocBuffer, fb::CreateAllocBuffer(b, m.request_id, m.bytes).Union()};
  }
  std::pair<fb::Body, flatbuffers::Offset<void>> operator()(const AllocReply& m) {
    auto msg = b.CreateString(m.status.message());
    return {fb::Body::AllocReply, fb::CreateAllocReply(b, m.request_id, to_fb(m.status.code()),
                                                       msg, m.buffer_id, m.bytes)
                                      .Union()};
  }
  std::pair<fb::Body, flatbuffers::Offset<void>> operator()(const FreeBuffer& m) {
    return {fb::Body::FreeBuffer, fb::CreateFreeBuffer(b, m.buffer_id).Union()};
  }
  std::pair<fb::Body, flatbuffers::Offset<void>> operator()(const Collective& m) {
    auto name = b.CreateString(m.name);
    auto send = to_fb(m.send);
    auto recv = to_fb(m.recv);
    return {fb::Body::Collective,
            fb::CreateCollective(b, m.request_id, static_cast<fb::CollectiveKind>(m.kind), name,
                                 static_cast<fb::DType>(m.dtype), static_cast<fb::ReduceOp>(m.op),
                                 m.count, m.root, &send, &recv, m.bounced,
                                 static_cast<fb::Memory>(m.memory))
                .Union()};
  }
  std::pair<fb::Body, flatbuffers::Offset<void>> operator()(const RegisterDevice& m) {
    auto handle = bytes_of(b, m.ipc_handle);
    flatbuffers::Offset<flatbuffers::Vector<std::uint8_t>> uuid;
    if (!all_zero(m.device_uuid)) uuid = bytes_of(b, m.device_uuid);
    return {fb::Body::RegisterDevice,
            fb::CreateRegisterDevice(b, m.request_id, m.allocation_id, handle, m.device, uuid,
                                     m.bytes)
                .Union()};
  }
  std::pair<fb::Body, flatbuffers::Offset<void>> operator()(const RegisterDeviceReply& m) {
    auto msg = b.CreateString(m.status.message());
    return {fb::Body::RegisterDeviceReply,
            fb::CreateRegisterDeviceReply(b, m.request_id, to_fb(m.status.code()), msg,
                                          m.allocation_id)
                .Union()};
  }
  std::pair<fb::Body, flatbuffers::Offset<void>> operator()(const UnregisterDevice& m) {
    return {fb::Body::UnregisterDevice, fb::CreateUnregisterDevice(b, m.allocation_id).Union()};
  }
  std::pair<fb::Body, flatbuffers::Offset<void>> operator()(const Completion& m) {
    auto msg = b.CreateString(m.status.message());
    return {fb::Body::Completion,
            fb::CreateCompletion(b, m.request_id, to_fb(m.status.code()), msg).Union()};
  }
  std::pair<fb::Body, flatbuffers::Offset<void>> operator()(const Heartbeat& m) {
    return {fb::Body::Heartbeat, fb::CreateHeartbeat(b, m.waiting_for).Union()};
  }
  std::pair<fb::Body, flatbuffers::Offset<void>> operator()(const Leave& m) {
    auto reason = b.CreateString(m.reason);
    return {fb::Body::Leave, fb::CreateLeave(b, reason).Union()};
  }
  std::pair<fb::Body, flatbuffers::Offset<void>> operator()(const KeepState& m) {
    auto name = b.CreateString(m.name);
    return {fb::Body::KeepState, fb::CreateKeepState(b, m.request_id, name, m.buffer_id, m.bytes).Union()};
  }
  std::pair<fb::Body, flatbuffers::Offset<void>> operator()(const FetchState& m) {
    auto name = b.CreateString(m.name);
    return {fb::Body::FetchState, fb::CreateFetchState(b, m.request_id, name).Union()};
  }
  std::pair<fb::Body, flatbuffers::Offset<void>> operator()(const NodesWaiting& m) {
    return {fb::Body::NodesWaiting, fb::CreateNodesWaiting(b, m.request_id).Union()};
  }
  std::pair<fb::Body, flatbuffers::Offset<void>> operator()(const NodesWaitingReply& m) {
    return {fb::Body::NodesWaitingReply, fb::CreateNodesWaitingReply(b, m.request_id, m.waiting).Union()};
  }
};

Result<Message> decode_collective(const fb::Collective& c) {
  if (!c.name() || c.name()->size() == 0)
    return Status::ProtocolError("collective without a tensor name");
  if (!is_collective_kind(static_cast<std::uint8_t>(c.kind())))
    return Status::ProtocolError("unknown collective kind " +
                                 std::to_string(static_cast<int>(c.kind())));
  Collective m;
  m.request_id = c.request_id();
  m.kind = static_cast<CollectiveKind>(c.kind());
  m.name = c.name()->str();
  m.dtype = static_cast<DType>(c.dtype());
  m.op = static_cast<ReduceOp>(c.op());
  if (!is_valid(m.dtype))
    return Status::ProtocolError("unknown dtype " + std::to_string(static_cast<int>(m.dtype)));
  if (!is_valid(m.op))
    return Status::ProtocolError("unknown reduce op " + std::to_string(static_cast<int>(m.op)));
  m.count = c.count();
  m.root = c.root();
  m.send = from_fb(c.send());
  m.recv = from_fb(c.recv());
  m.bounced = c.bounced();
  if (static_cast<std::uint8_t>(c.memory()) > static_cast<std::uint8_t>(Memory::kDevice))
    return Status::ProtocolError("unknown memory kind " +
                                 std::to_string(static_cast<int>(c.memory())));
  m.memory = static_cast<Memory>(c.memory());
  return Message(std::move(m));
}

Result<Message> decode_register_device(const fb::RegisterDevice& r) {
  const auto* handle = r.ipc_handle();
  if (!handle || handle->size() != kIpcHandleBytes)
    return Status::ProtocolError(
        "device registration with an IPC handle of " + std::to_string(handle ? handle->size() : 0) +
        " bytes; a cudaIpcMemHandle_t has " + std::to_string(kIpcHandleBytes));
  const auto* uuid = r.device_uuid();
  if (uuid && uuid->size() != kDeviceUuidBytes)
    return Status::ProtocolError("device registration with a device UUID of " +
                                 std::to_string(uuid->size()) + " bytes; a UUID has " +
                                 std::to_string(kDeviceUuidBytes));
  RegisterDevice m;
  m.request_id = r.request_id();
  m.allocation_id = r.allocation_id();
  std::memcpy(m.ipc_handle.data(), handle->data(), kIpcHandleBytes);
  m.device = r.device();
  if (uuid) std::memcpy(m.device_uuid.data(), uuid->data(), kDeviceUuidBytes);
  m.bytes = r.bytes();
  return Message(std::move(m));
}

}  // namespace

std::vector<std::uint8_t> encode(const Message& message) {
  flatbuffers::FlatBufferBuilder b(256);
  auto [type, body] = std::visit(Encoder{b}, message);
  b.Finish(fb::CreateFrame(b, type, body));
  return frame_of(b.GetBufferPointer(), b.GetSize());
}

std::vector<std::uint8_t> frame_of(const std::uint8_t* body, std::size_t size) {
  std::vector<std::uint8_t> frame;
  frame.reserve(kFrameHeaderBytes + size);
  for (std::size_t i = 0; i < kFrameHeaderBytes; ++i) frame.push_back(static_cast<std::uint8_t>(size >> (8 * i)));
  frame.insert(frame.end(), body, body + size);  // copied once, not zeroed first
  return frame;
}

std::span<const std::uint8_t> aligned(std::span<const std::uint8_t> body,
                                      std::vector<std::uint64_t>& storage) {
  if (reinterpret_cast<std::uintptr_t>(body.data()) % alignof(std::uint64_t) == 0) return body;
  storage.resize((body.size() + 7) / 8);
  std::memcpy(storage.data(), body.data(), body.size());
  return {reinterpret_cast<const std::uint8_t*>(storage.data()), body.size()};
}

Result<std::uint32_t> frame_length(std::span<const std::uint8_t, kFrameHeaderBytes> header,
                                   std::size_t max_bytes) {
  std::uint32_t size = 0;
  for (std::size_t i = 0; i < kFrameHeaderBytes; ++i)
    size |= static_cast<std::uint32_t>(header[i]) << (8 * i);
  if (size == 0) return Status::ProtocolError("empty frame");
  const std::size_t cap = std::min(max_bytes, kMaxFrameBytes);
  if (size > cap)
    return Status::ProtocolError("frame of " + std::to_string(size) + " bytes exceeds the limit of " +
                                 std::to_string(cap) + " bytes");
  return size;
}

Result<Message> decode(std::span<const std::uint8_t> body) {
  std::vector<std::uint64_t> storage;
  body = aligned(body, storage);
  flatbuffers::Verifier verifier(body.data(), body.size(), /*max_depth=*/16, /*max_tables=*/64);
  if (!fb::VerifyFrameBuffer(verifier))
    return Status::ProtocolError("frame failed FlatBuffers verification (" +
                                 std::to_string(body.size()) + " bytes)");
  const fb::Frame* frame = fb::GetFrame(body.data());
  // The verifier accepts a union whose table is absent; such a frame says nothing.
  if (frame->body_type() != fb::Body::NONE && frame->body() == nullptr)
    return Status::ProtocolError("frame names a message type but carries no message");
  switch (frame->body_type()) {
    case fb::Body::Hello: {
      const auto* m = frame->body_as_Hello();
      if (!m->job_id() || m->job_id()->size() == 0)
        return Status::ProtocolError("hello without a job id");
      return Message(Hello{m->protocol_version(), m->job_id()->str(), m->local_rank(), m->local_size(), m->pid(),
                           m->shm_channel(), m->num_nodes(), m->node_rank(), str(m->nodes()),
                           str(m->rendezvous()), str(m->job_token()), m->min_nodes(), m->max_nodes()});
    }
    case fb::Body::HelloReply: {
      const auto* m = frame->body_as_HelloReply();
      auto status = status_from(m->status(), m->message());
      if (!status) return unknown_status(m->status());
      if (m->num_nodes() == 0 || m->node_rank() >= m->num_nodes())
        return Status::ProtocolError("hello reply: node rank " + std::to_string(m->node_rank()) +
                                     " is not below the node count " +
                                     std::to_string(m->num_nodes()));
      return Message(HelloReply{*status, m->protocol_version(), str(m->daemon_version()),
                                m->node_rank(), m->num_nodes(), m->channel_bytes(), m->heartbeat_ms()});
    }
    case fb::Body::AllocBuffer: {
      const auto* m = frame->body_as_AllocBuffer();
      return Message(AllocBuffer{m->request_id(), m->bytes()});
    }
    case fb::Body::AllocReply: {
      const auto* m = frame->body_as_AllocReply();
      auto status = status_from(m->status(), m->message());
      if (!status) return unknown_status(m->status());
      return Message(AllocReply{m->request_id(), *status, m->buffer_id(), m->bytes()});
    }
    case fb::Body::FreeBuffer:
      return Message(FreeBuffer{frame->body_as_FreeBuffer()->buffer_id()});
    case fb::Body::Collective:
      return decode_collective(*frame->body_as_Collective());
    case fb::Body::Completion: {
      const auto* m = frame->body_as_Completion();
      auto status = status_from(m->status(), m->message());
      if (!status) return unknown_status(m->status());
      return Message(Completion{m->request_id(), *status});
    }
    case fb::Body::RegisterDevice:
      return decode_register_device(*frame->body_as_RegisterDevice());
    case fb::Body::RegisterDeviceReply: {
      const auto* m = frame->body_as_RegisterDeviceReply();
      auto status = status_from(m->status(), m->message());
      if (!status) return unknown_status(m->status());
      return Message(RegisterDeviceReply{m->request_id(), *status, m->allocation_id()});
    }
    case fb::Body::UnregisterDevice:
      return Message(UnregisterDevice{frame->body_as_UnregisterDevice()->allocation_id()});
    case fb::Body::Heartbeat:
      return Message(Heartbeat{frame->body_as_Heartbeat()->waiting_for()});
    case fb::Body::Leave:
      return Message(Leave{str(frame->body_as_Leave()->reason())});
    case fb::Body::KeepState: {
      const auto* m = frame->body_as_KeepState();
      if (!m->name() || m->name()->size() == 0) return Status::ProtocolError("keep-state without a name");
      return Message(KeepState{m->request_id(), m->name()->str(), m->buffer_id(), m->bytes()});
    }
    case fb::Body::FetchState: {
      const auto* m = frame->body_as_FetchState();
      if (!m->name() || m->name()->size() == 0) return Status::ProtocolError("fetch-state without a name");
      return Message(FetchState{m->request_id(), m->name()->str()});
    }
    case fb::Body::NodesWaiting:
      return Message(NodesWaiting{frame->body_as_NodesWaiting()->request_id()});
    case fb::Body::NodesWaitingReply: {
      const auto* m = frame->body_as_NodesWaitingReply();
      return Message(NodesWaitingReply{m->request_id(), m->waiting()});
    }
    case fb::Body::NONE:
      break;
  }
  return Status::ProtocolError("frame with no or unknown message type " +
                               std::to_string(static_cast<int>(frame->body_type())));
}

}  // namespace ringsync::wire
