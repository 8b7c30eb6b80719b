// Trainer <-> daemon messages as plain structs. FlatBuffers stays in wire.cpp:
// encode() builds a length-prefixed frame, decode() verifies before reading.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "common/collective_kind.h"
#include "common/dtype.h"
#include "common/status.h"

namespace ringsync::wire {

// Version 2 added device buffers (RegisterDevice, Collective::memory); 3 the
// job's description in the hello, Heartbeat and Leave; 4 KeepState,
// FetchState, NodesWaiting and the elastic range in the hello; 5 the
// reduce-scatter and alltoall collectives. Both sides insist on the same
// version in the hello, so a mixed pair fails there with a message naming both
// versions.
inline constexpr std::uint32_t kProtocolVersion = 5;
inline constexpr std::size_t kFrameHeaderBytes = 4;
// Hard upper bound for any control frame, whatever the configuration says.
inline constexpr std::size_t kMaxFrameBytes = 1 << 20;

struct BufferRef {
  std::uint32_t buffer_id = 0;
  std::uint64_t offset = 0;
};

// What a Collective's BufferRefs name: shared buffers (AllocBuffer) or device
// allocations (RegisterDevice).
enum class Memory : std::uint8_t { kHost = 0, kDevice };
const char* memory_name(Memory memory);  // "host", "device"

// A cudaIpcMemHandle_t and a device UUID as bytes.
inline constexpr std::size_t kIpcHandleBytes = 64;
inline constexpr std::size_t kDeviceUuidBytes = 16;
using IpcHandleBytes = std::array<std::byte, kIpcHandleBytes>;
using DeviceUuid = std::array<std::byte, kDeviceUuidBytes>;

struct Hello {
  std::uint32_t protocol_version = kProtocolVersion;
  std::string job_id;
  std::uint32_t local_rank = 0;
  std::uint32_t local_size = 0;
  std::int32_t pid = 0;
  bool shm_channel = false;  // the client can use the shared-memory channel
  // The job as its launcher described it (schemas/client.fbs).
  std::uint32_t num_nodes = 0;  // 0: not said
  std::int32_t node_rank = -1;  // -1: not said
  std::string nodes;            // "host:port,..." by node rank
  std::string rendezvous;       // etcd://HOST:PORT[,...]
  std::string job_token;
  std::uint32_t min_nodes = 0;  // elastic jobs (0: not elastic)
  std::uint32_t max_nodes = 0;
};

struct HelloReply {
  Status status;
  std::uint32_t protocol_version = kProtocolVersion;
  std::string daemon_version;
  std::uint32_t node_rank = 0;  // multi-node jobs: this node's rank
  std::uint32_t num_nodes = 1;
  // > 0: the reply carries the memfd of a shared-memory channel of this many
  // bytes (shm::Channel) and every later frame, both ways, goes through it.
  std::uint64_t channel_bytes = 0;
  // > 0: a thread waiting longer than this sends a Heartbeat, every this often.
  std::uint32_t heartbeat_ms = 0;
};

struct AllocBuffer {
  std::uint64_t request_id = 0;
  std::uint64_t bytes = 0;
};

// On success the frame carries the region's memfd as SCM_RIGHTS.
struct AllocReply {
  std::uint64_t request_id = 0;
  Status status;
  std::uint32_t buffer_id = 0;
  std::uint64_t bytes = 0;
};

struct FreeBuffer {
  std::uint32_t buffer_id = 0;
};

struct Collective {
  std::uint64_t request_id = 0;
  CollectiveKind kind = CollectiveKind::kAllreduce;
  std::string name;
  DType dtype = DType::kF32;
  ReduceOp op = ReduceOp::kSum;
  std::uint64_t count = 0;  // elements this rank contributes
  std::uint32_t root = 0;   // broadcast root, a local rank
  BufferRef send;
  BufferRef recv;
  bool bounced = false;  // the client copied through a bounce buffer
  Memory memory = Memory::kHost;
};

// One CUDA allocation of the trainer, whole (base and size from
// cuMemGetAddressRange), under an id the client chose.
struct RegisterDevice {
  std::uint64_t request_id = 0;
  std::uint32_t allocation_id = 0;  // non-zero, unique on the connection
  IpcHandleBytes ipc_handle{};      // of the allocation base
  std::int32_t device = 0;          // ordinal in the trainer
  DeviceUuid device_uuid{};         // all zero: unknown
  std::uint64_t bytes = 0;
};

struct RegisterDeviceReply {
  std::uint64_t request_id = 0;
  Status status;
  std::uint32_t allocation_id = 0;
};

// No reply: the daemon closes its mapping once no collective uses it.
struct UnregisterDevice {
  std::uint32_t allocation_id = 0;
};

struct Completion {
  std::uint64_t request_id = 0;
  Status status;
};

// The rank is alive and waits for `waiting_for` (0: it stopped waiting).
struct Heartbeat {
  std::uint64_t waiting_for = 0;
};

// rs_disconnect(): the rank leaves on purpose.
struct Leave {
  std::string reason;
};

// Keep the first `bytes` of shared buffer `buffer_id` as this rank's committed
// state `name` on this node, replacing what was kept under that name; the
// daemon holds the memory after the trainer is gone. Answered by a Completion.
struct KeepState {
  std::uint64_t request_id = 0;
  std::string name;
  std::uint32_t buffer_id = 0;
  std::uint64_t bytes = 0;
};

// The state `name` kept for this rank's local slot on this node. Answered by an
// AllocReply carrying that buffer (a new id, its memfd) and its length, or
// buffer_id 0 and no memfd when nothing is kept under the name.
struct FetchState {
  std::uint64_t request_id = 0;
  std::string name;
};

// How many nodes wait to join the job's next run (elastic jobs with room).
struct NodesWaiting {
  std::uint64_t request_id = 0;
};
struct NodesWaitingReply {
  std::uint64_t request_id = 0;
  std::uint32_t waiting = 0;
};

using Message = std::variant<Hello, HelloReply, AllocBuffer, AllocReply, FreeBuffer, Collective, Completion,
                             RegisterDevice, RegisterDeviceReply, UnregisterDevice, Heartbeat, Leave, KeepState,
                             FetchState, NodesWaiting, NodesWaitingReply>;

// One frame: 4-byte little-endian body length, then the FlatBuffers body.
std::vector<std::uint8_t> encode(const Message& message);

// Body length from a frame header; error when it is 0 or above max_bytes.
Result<std::uint32_t> frame_length(std::span<const std::uint8_t, kFrameHeaderBytes> header,
                                   std::size_t max_bytes);

// Framing shared by every FlatBuffers protocol here: `body` behind its length.
std::vector<std::uint8_t> frame_of(const std::uint8_t* body, std::size_t size);

// FlatBuffers reads 8-byte fields in place: `body` itself when it is 8-byte
// aligned, otherwise an aligned copy kept in `storage`.
std::span<const std::uint8_t> aligned(std::span<const std::uint8_t> body,
                                      std::vector<std::uint64_t>& storage);

// Verifies the body with the FlatBuffers verifier and checks every enum and
// required field before building the struct.
Result<Message> decode(std::span<const std::uint8_t> body);

}  // namespace ringsync::wire
