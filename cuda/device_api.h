// The daemon's view of GPU memory: everything service/ needs from CUDA, behind plain
// C++ so the daemon builds and runs without nvcc. Built with nvcc (ringsync_cuda),
// these call the CUDA runtime and the kernels in cuda/; built without it
// (ringsync_cuda_stub), every call returns an error saying so. All pointers named
// `device` are device addresses in this process (opened IPC mappings included).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "common/dtype.h"
#include "common/status.h"

namespace ringsync::cuda {

// A cudaIpcMemHandle_t as bytes (64 in every CUDA release so far).
using IpcHandle = std::array<std::byte, 64>;

// True when this build has the CUDA code compiled in (nvcc was found).
bool compiled_with_cuda();

// Ok when a device can be used; otherwise why not ("built without CUDA", "no CUDA
// device: ...", "CUDA is unusable here: ... (cudaErrorInsufficientDriver)"). Decided
// once per process, as the CUDA runtime itself keeps a failed initialization.
Status available();
// True when available() failed because this machine has no GPU (or none visible),
// as opposed to a GPU that is there but unusable (driver too old, broken install):
// the tools skip on the first and fail on the second.
bool no_device_here();

// A GPU's UUID (cudaDeviceProp::uuid / cuDeviceGetUuid); all zero: unknown.
using DeviceUuid = std::array<std::byte, 16>;

// Another process's allocation mapped here.
struct IpcMapping {
  void* base = nullptr;
  std::size_t bytes = 0;  // the allocation's real size (cuMemGetAddressRange), not a claim
  int device = -1;        // this process's ordinal of the GPU holding it
};

// Maps another process's allocation (cudaIpcOpenMemHandle, lazy peer access) on the GPU
// whose UUID is `uuid` (ordinals differ between processes under CUDA_VISIBLE_DEVICES;
// when `uuid` is all zero, `device` is taken as this process's ordinal) and returns
// where it is and how big it really is; close_ipc() unmaps it. The caller caches
// mappings: CUDA opens a handle only once per process (a second open of a handle
// this process already holds fails).
Result<IpcMapping> open_ipc(const IpcHandle& handle, const DeviceUuid& uuid, int device);
Status close_ipc(void* base, int device);  // `device`: IpcMapping::device

// True when kernels on GPU `device` can read memory on GPU `peer` (the same GPU,
// or peer access, which streams on `device` enable wherever the hardware allows).
bool peer_reachable(int device, int peer);

class Event;

// An ordered queue of device work (a cudaStream_t underneath).
class Stream {
 public:
  static Result<Stream> create(int device);
  Stream() = default;
  Stream(Stream&&) noexcept;
  Stream& operator=(Stream&&) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream();

  // Waits for everything queued so far; the error of any failed step.
  Status synchronize();
  // Work queued on this stream from now on starts only after `event`'s work is done
  // (cudaStreamWaitEvent); returns at once.
  Status wait(Event& event);
  void* native() const { return handle_; }
  int device() const { return device_; }

 private:
  void* handle_ = nullptr;
  int device_ = 0;
};

// A point in a stream's work (a cudaEvent_t without timing underneath).
class Event {
 public:
  static Result<Event> create(int device);
  Event() = default;
  Event(Event&&) noexcept;
  Event& operator=(Event&&) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event();

  // Marks the end of what `stream` has queued so far.
  Status record(Stream& stream);
  // True once the recorded work is done; the error of a failed step. Never blocks.
  Result<bool> query();
  Status synchronize();
  void* handle() const { return handle_; }  // the cudaEvent_t

 private:
  void* handle_ = nullptr;
  int device_ = 0;
};

// Calls fn(arg) on a CUDA-owned thread once everything queued on `stream` before it is
// done (cudaLaunchHostFunc). fn must not call CUDA; it should only wake someone up.
Status launch_host_callback(Stream& stream, void (*fn)(void*), void* arg);

// Most inputs one reduce() call takes (they travel as kernel arguments).
inline constexpr std::size_t kMaxReduceSources = 64;

// dst[i] = op(srcs[0][i], ..., srcs[nsrc-1][i]) for i < count on the device, same
// semantics as reduce::reduce_reference (common/reduce.h), avg included. dst may
// alias srcs[0]. All pointers device memory. Queued on `stream`. 1 <= nsrc <=
// kMaxReduceSources; any alignment (16-byte aligned buffers take the vector path).
Status reduce(void* dst, const void* const* srcs, std::size_t nsrc, std::size_t count, DType dtype,
              ReduceOp op, Stream& stream);

// Copies of `bytes` queued on `stream`: device→host, host→device, device→device.
// Host memory should be pinned (pin_host) for the copies to overlap other work.
Status copy_to_host(void* host, const void* device, std::size_t bytes, Stream& stream);
Status copy_to_device(void* device, const void* host, std::size_t bytes, Stream& stream);
Status copy_device(void* dst, const void* src, std::size_t bytes, Stream& stream);

// Page-locks [ptr, ptr + bytes) (cudaHostRegister) / releases it.
Status pin_host(void* ptr, std::size_t bytes);
Status unpin_host(void* ptr);

// ---- Trainer side (the client library) ----

// Where a pointer lives as CUDA sees it. Without CUDA (or a device) every pointer is host.
struct PointerInfo {
  bool device = false;  // device memory (cudaMalloc, or a VMM/IPC mapping)
  int ordinal = -1;     // its device, when `device`
};
Result<PointerInfo> query_pointer(const void* ptr);

// What another process needs to reach `device_ptr`: the IPC handle of the allocation
// holding it (cudaIpcGetMemHandle of the base from cuMemGetAddressRange) and where
// the pointer sits in it. Fails for memory legacy IPC cannot share (VMM, managed).
struct IpcExport {
  IpcHandle handle{};
  std::size_t offset = 0;            // device_ptr - allocation base
  std::size_t allocation_bytes = 0;  // the whole allocation
  int device = -1;
};
Result<IpcExport> export_ipc(const void* device_ptr);

}  // namespace ringsync::cuda
