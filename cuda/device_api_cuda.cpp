// device_api.h over the CUDA runtime (linked statically: the daemon needs only the
// driver, libcuda.so.1, at run time, and starts without it).
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/device_api.h"
#include "cuda/reduce_kernels.h"

namespace ringsync::cuda {
namespace {

static_assert(sizeof(cudaIpcMemHandle_t) == sizeof(IpcHandle), "cudaIpcMemHandle_t changed size");

// "cudaMemcpyAsync: an illegal memory access was encountered (cudaErrorIllegalAddress)"
Status from_cuda(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return Status::Ok();
  (void)cudaGetLastError();  // reported here: not again by a later, unrelated call
  std::string message = std::string(what) + ": " + cudaGetErrorString(error) + " (" +
                        cudaGetErrorName(error) + ")";
  if (error == cudaErrorMemoryAllocation) return Status::OutOfMemory(std::move(message));
  return Status::Internal(std::move(message));
}

#define RS_CUDA_TRY(call) RINGSYNC_RETURN_IF_ERROR(from_cuda((call), #call))

cudaStream_t native(Stream& stream) { return static_cast<cudaStream_t>(stream.native()); }

// cuMemGetAddressRange through the runtime's driver entry point, so that nothing
// links libcuda.so.1 (a daemon without a driver must still start).
using GetAddressRangeFn = int (*)(unsigned long long* base, std::size_t* size,
                                  unsigned long long ptr);

Result<GetAddressRangeFn> get_address_range_fn() {
  static std::once_flag once;
  static GetAddressRangeFn fn = nullptr;
  static cudaError_t error = cudaSuccess;
  std::call_once(once, [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    error = cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &p, 12000, cudaEnableDefault,
                                             &found);
    if (error == cudaSuccess && found != cudaDriverEntryPointSuccess)
      error = cudaErrorSymbolNotFound;
    fn = reinterpret_cast<GetAddressRangeFn>(p);
  });
  if (error != cudaSuccess) return from_cuda(error, "finding cuMemGetAddressRange in the driver");
  return fn;
}

}  // namespace

bool compiled_with_cuda() { return true; }

namespace {

bool driver_installed() {
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (driver) dlclose(driver);
  return driver != nullptr;
}

struct Availability {
  Status status;
  bool no_device = false;
};

const Availability& availability() {
  static const Availability found = [] {
    Availability a;
    int count = 0;
    const cudaError_t error = cudaGetDeviceCount(&count);
    // Without an NVIDIA driver at all the runtime says "insufficient driver" too;
    // only a driver that is there but older than this runtime is a real failure.
    const bool no_driver = error == cudaErrorInsufficientDriver && !driver_installed();
    if (error == cudaErrorNoDevice || (error == cudaSuccess && count == 0)) {
      a.no_device = true;
      a.status = Status::InvalidArgument("no CUDA device: cudaGetDeviceCount found none");
    } else if (no_driver) {
      a.no_device = true;
      a.status = Status::InvalidArgument(
          "no CUDA device: no NVIDIA driver (libcuda.so.1) on this machine");
    } else if (error != cudaSuccess) {
      a.status = Status::InvalidArgument(std::string("CUDA is unusable here: cudaGetDeviceCount: ") +
                                         cudaGetErrorString(error) + " (" +
                                         cudaGetErrorName(error) + ")");
    }
    return a;
  }();
  return found;
}

}  // namespace

Status available() { return availability().status; }
bool no_device_here() { return availability().no_device; }

namespace {

// This process's ordinal of the GPU with `uuid`; `fallback` when the UUID is unknown.
Result<int> ordinal_of(const DeviceUuid& uuid, int fallback) {
  if (uuid == DeviceUuid{}) return fallback;
  int count = 0;
  RS_CUDA_TRY(cudaGetDeviceCount(&count));
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    cudaDeviceProp prop{};
    RS_CUDA_TRY(cudaGetDeviceProperties(&prop, ordinal));
    static_assert(sizeof(prop.uuid) == sizeof(DeviceUuid));
    if (std::memcmp(&prop.uuid, uuid.data(), uuid.size()) == 0) return ordinal;
  }
  return Status::InvalidArgument(
      "the trainer's GPU (its ordinal " + std::to_string(fallback) + ") is not among the " +
      std::to_string(count) + " GPU(s) this process sees; give ringsyncd every GPU its "
      "trainers use (check CUDA_VISIBLE_DEVICES and the container's device list)");
}

}  // namespace

Result<IpcMapping> open_ipc(const IpcHandle& handle, const DeviceUuid& uuid, int device) {
  RINGSYNC_RETURN_IF_ERROR(available());
  auto ordinal = ordinal_of(uuid, device);
  if (!ordinal.ok()) return ordinal.status();
  auto range_fn = get_address_range_fn();
  if (!range_fn.ok()) return range_fn.status();
  cudaIpcMemHandle_t native_handle;
  std::memcpy(&native_handle, handle.data(), sizeof(native_handle));
  RS_CUDA_TRY(cudaSetDevice(*ordinal));
  void* base = nullptr;
  RS_CUDA_TRY(cudaIpcOpenMemHandle(&base, native_handle, cudaIpcMemLazyEnablePeerAccess));
  unsigned long long range_base = 0;
  std::size_t size = 0;
  const int driver_error =
      (*range_fn)(&range_base, &size, reinterpret_cast<unsigned long long>(base));
  if (driver_error != 0) {
    cudaIpcCloseMemHandle(base);
    return Status::Internal("sizing a mapped CUDA IPC allocation: cuMemGetAddressRange failed "
                            "with CUresult " + std::to_string(driver_error));
  }
  return IpcMapping{base, size, *ordinal};
}

Status close_ipc(void* base, int device) {
  RS_CUDA_TRY(cudaSetDevice(device));
  RS_CUDA_TRY(cudaIpcCloseMemHandle(base));
  return Status::Ok();
}

// ---- Stream ----

namespace {

// Lets kernels on `device` read the other GPUs' memory (local ranks' buffers on
// other GPUs of the node), wherever the hardware allows it; returns the GPUs it can
// read. Tried once per device (the current device is `device` on return).
std::vector<int> enable_peer_access(int device) {
  static std::mutex mu;
  static std::map<int, std::vector<int>> reachable;
  std::lock_guard lock(mu);
  if (auto known = reachable.find(device); known != reachable.end()) return known->second;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return {device};  // not remembered: tried again next time
  }
  std::vector<int>& peers = reachable[device];
  peers.push_back(device);
  if (cudaSetDevice(device) != cudaSuccess) {
    (void)cudaGetLastError();
    return peers;
  }
  for (int peer = 0; peer < count; ++peer) {
    int can = 0;
    if (peer == device) continue;
    if (cudaDeviceCanAccessPeer(&can, device, peer) != cudaSuccess || !can) {
      (void)cudaGetLastError();
      continue;
    }
    const cudaError_t enabled = cudaDeviceEnablePeerAccess(peer, 0);
    if (enabled == cudaSuccess || enabled == cudaErrorPeerAccessAlreadyEnabled) peers.push_back(peer);
    (void)cudaGetLastError();
  }
  return peers;
}

}  // namespace

bool peer_reachable(int device, int peer) {
  if (device == peer) return true;
  if (!available().ok()) return false;
  const std::vector<int> peers = enable_peer_access(device);
  return std::find(peers.begin(), peers.end(), peer) != peers.end();
}

Result<Stream> Stream::create(int device) {
  RINGSYNC_RETURN_IF_ERROR(available());
  enable_peer_access(device);
  RS_CUDA_TRY(cudaSetDevice(device));
  cudaStream_t handle = nullptr;
  RS_CUDA_TRY(cudaStreamCreateWithFlags(&handle, cudaStreamNonBlocking));
  Stream stream;
  stream.handle_ = handle;
  stream.device_ = device;
  return stream;
}

Stream::Stream(Stream&& other) noexcept : handle_(other.handle_), device_(other.device_) {
  other.handle_ = nullptr;
}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    if (handle_) cudaStreamDestroy(static_cast<cudaStream_t>(handle_));
    handle_ = other.handle_;
    device_ = other.device_;
    other.handle_ = nullptr;
  }
  return *this;
}

Stream::~Stream() {
  if (handle_) cudaStreamDestroy(static_cast<cudaStream_t>(handle_));
}

Status Stream::synchronize() {
  RS_CUDA_TRY(cudaStreamSynchronize(static_cast<cudaStream_t>(handle_)));
  return Status::Ok();
}

Status Stream::wait(Event& event) {
  RS_CUDA_TRY(cudaStreamWaitEvent(static_cast<cudaStream_t>(handle_), static_cast<cudaEvent_t>(event.handle()), 0));
  return Status::Ok();
}

// ---- Event ----

Result<Event> Event::create(int device) {
  RINGSYNC_RETURN_IF_ERROR(available());
  RS_CUDA_TRY(cudaSetDevice(device));
  cudaEvent_t handle = nullptr;
  RS_CUDA_TRY(cudaEventCreateWithFlags(&handle, cudaEventDisableTiming));
  Event event;
  event.handle_ = handle;
  event.device_ = device;
  return event;
}

Event::Event(Event&& other) noexcept : handle_(other.handle_), device_(other.device_) {
  other.handle_ = nullptr;
}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (handle_) cudaEventDestroy(static_cast<cudaEvent_t>(handle_));
    handle_ = other.handle_;
    device_ = other.device_;
    other.handle_ = nullptr;
  }
  return *this;
}

Event::~Event() {
  if (handle_) cudaEventDestroy(static_cast<cudaEvent_t>(handle_));
}

Status Event::record(Stream& stream) {
  RS_CUDA_TRY(cudaSetDevice(device_));
  RS_CUDA_TRY(cudaEventRecord(static_cast<cudaEvent_t>(handle_), native(stream)));
  return Status::Ok();
}

Result<bool> Event::query() {
  const cudaError_t error = cudaEventQuery(static_cast<cudaEvent_t>(handle_));
  if (error == cudaSuccess) return true;
  if (error == cudaErrorNotReady) return false;
  return from_cuda(error, "cudaEventQuery");
}

Status Event::synchronize() {
  RS_CUDA_TRY(cudaEventSynchronize(static_cast<cudaEvent_t>(handle_)));
  return Status::Ok();
}

Status launch_host_callback(Stream& stream, void (*fn)(void*), void* arg) {
  RS_CUDA_TRY(cudaLaunchHostFunc(native(stream), fn, arg));
  return Status::Ok();
}

// ---- Work ----

Status reduce(void* dst, const void* const* srcs, std::size_t nsrc, std::size_t count,
              DType dtype, ReduceOp op, Stream& stream) {
  if (!is_valid(dtype) || !is_valid(op))
    return Status::InvalidArgument("device reduce: invalid dtype or op");
  if (nsrc == 0 || nsrc > kMaxReduceSources)
    return Status::InvalidArgument("device reduce: " + std::to_string(nsrc) +
                                   " inputs; between 1 and " +
                                   std::to_string(kMaxReduceSources) + " are supported");
  if (count == 0) return Status::Ok();
  RS_CUDA_TRY(cudaSetDevice(stream.device()));
  RS_CUDA_TRY(launch_reduce(dst, srcs, nsrc, count, dtype, op, native(stream), stream.device()));
  return Status::Ok();
}

Status copy_to_host(void* host, const void* device, std::size_t bytes, Stream& stream) {
  if (bytes == 0) return Status::Ok();
  RS_CUDA_TRY(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, native(stream)));
  return Status::Ok();
}

Status copy_to_device(void* device, const void* host, std::size_t bytes, Stream& stream) {
  if (bytes == 0) return Status::Ok();
  RS_CUDA_TRY(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, native(stream)));
  return Status::Ok();
}

Status copy_device(void* dst, const void* src, std::size_t bytes, Stream& stream) {
  if (bytes == 0) return Status::Ok();
  RS_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, native(stream)));
  return Status::Ok();
}

Status pin_host(void* ptr, std::size_t bytes) {
  RINGSYNC_RETURN_IF_ERROR(available());
  RS_CUDA_TRY(cudaHostRegister(ptr, bytes, cudaHostRegisterPortable));
  return Status::Ok();
}

Status unpin_host(void* ptr) {
  RS_CUDA_TRY(cudaHostUnregister(ptr));
  return Status::Ok();
}

// ---- Trainer side ----

Result<PointerInfo> query_pointer(const void* ptr) {
  if (!available().ok()) return PointerInfo{};
  cudaPointerAttributes attributes{};
  const cudaError_t error = cudaPointerGetAttributes(&attributes, ptr);
  if (error == cudaErrorInvalidValue) {
    cudaGetLastError();  // a pointer CUDA has never seen: host memory
    return PointerInfo{};
  }
  RS_CUDA_TRY(error);
  PointerInfo info;
  // Managed memory is readable from the host, so it travels as host memory.
  info.device = attributes.type == cudaMemoryTypeDevice;
  info.ordinal = info.device ? attributes.device : -1;
  return info;
}

Result<IpcExport> export_ipc(const void* device_ptr) {
  auto info = query_pointer(device_ptr);
  if (!info.ok()) return info.status();
  if (!info->device)
    return Status::InvalidArgument("exporting a CUDA IPC handle: the pointer is not device memory");
  auto range_fn = get_address_range_fn();
  if (!range_fn.ok()) return range_fn.status();
  RS_CUDA_TRY(cudaSetDevice(info->ordinal));
  unsigned long long base = 0;
  std::size_t size = 0;
  const int driver_error =
      (*range_fn)(&base, &size, reinterpret_cast<unsigned long long>(device_ptr));
  if (driver_error != 0)
    return Status::InvalidArgument("exporting a CUDA IPC handle: cuMemGetAddressRange failed "
                                   "with CUresult " + std::to_string(driver_error));
  cudaIpcMemHandle_t handle;
  const cudaError_t error = cudaIpcGetMemHandle(&handle, reinterpret_cast<void*>(base));
  if (error != cudaSuccess) {
    cudaGetLastError();
    return Status::InvalidArgument(
        std::string("exporting a CUDA IPC handle: cudaIpcGetMemHandle: ") +
        cudaGetErrorString(error) +
        "; legacy CUDA IPC shares only cudaMalloc memory (not cudaMallocManaged, "
        "cudaMallocAsync pools or cuMemCreate allocations)");
  }
  IpcExport out;
  std::memcpy(out.handle.data(), &handle, sizeof(handle));
  out.offset = reinterpret_cast<std::uintptr_t>(device_ptr) - base;
  out.allocation_bytes = size;
  out.device = info->ordinal;
  return out;
}

}  // namespace ringsync::cuda
