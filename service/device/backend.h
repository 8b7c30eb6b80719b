// The GPU as the daemon's device path uses it: mapping trainers' allocations,
// ordered queues of reductions and copies, pinned host memory. ringsyncd uses
// CUDA (cuda_backend(), over cuda/device_api.h; every call fails with a clear
// message in builds without CUDA); tests use plain host memory behind the same
// interface, so the device data path is tested without a GPU.
#pragma once

#include <cstddef>
#include <memory>

#include "common/dtype.h"
#include "common/status.h"
#include "common/wire.h"
#include "cuda/chunk_copier.h"

namespace ringsync::service::device {

// One ordered queue of device work (a CUDA stream). Calls queue work and may
// return before it ran; synchronize() waits for all of it and reports the
// first failure.
class DeviceQueue {
 public:
  virtual ~DeviceQueue() = default;
  // dst = op(srcs[0..n)) elementwise over count elements; dst may alias srcs[0].
  virtual Status reduce(void* dst, const void* const* srcs, std::size_t n, std::size_t count,
                        DType dtype, ReduceOp op) = 0;
  virtual Status copy_device(void* dst, const void* src, std::size_t bytes) = 0;
  virtual Status copy_to_host(void* host, const void* device, std::size_t bytes) = 0;
  virtual Status copy_to_device(void* device, const void* host, std::size_t bytes) = 0;
  virtual Status synchronize() = 0;
};

// Host memory the device copies to and from quickly (pinned); freed with the object.
class HostBuffer {
 public:
  virtual ~HostBuffer() = default;
  virtual std::byte* data() = 0;
  virtual std::size_t size() const = 0;
};

// A trainer's allocation as the daemon mapped it.
struct MappedAllocation {
  void* base = nullptr;
  std::size_t bytes = 0;  // its real size, as the GPU driver reports it
  int device = -1;        // the daemon's ordinal of its GPU
};

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  // Ok when GPU memory can be used here; otherwise why not, in words for the user.
  virtual Status available() = 0;
  // Maps a trainer's allocation (its IPC handle) on the GPU with `uuid` (all zero:
  // the daemon's ordinal `device`); close_ipc() unmaps.
  virtual Result<MappedAllocation> open_ipc(const wire::IpcHandleBytes& handle,
                                            const wire::DeviceUuid& uuid, int device) = 0;
  virtual Status close_ipc(void* base, int device) = 0;
  // True when work queued on GPU `device` can read memory on GPU `peer`.
  virtual bool reachable(int device, int peer) = 0;
  // A queue on `device` for the caller's exclusive use until it is destroyed.
  virtual Result<std::unique_ptr<DeviceQueue>> queue(int device) = 0;
  virtual Result<std::unique_ptr<HostBuffer>> host_buffer(std::size_t bytes) = 0;
  // A copy engine between `device` and host_buffer() memory, chunk by chunk, for a
  // staged ring (execution/ring_staging.h): its own stream, for the caller alone.
  virtual Result<std::unique_ptr<cuda::ChunkCopier>> copier(int device) = 0;
};

// CUDA, shared by the whole process (streams are kept for reuse).
std::shared_ptr<DeviceBackend> cuda_backend();

}  // namespace ringsync::service::device
