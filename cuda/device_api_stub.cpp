// device_api.h for builds without nvcc: nothing can touch device memory, and every
// call that would says so in words a user can act on.
#include "cuda/device_api.h"

#include <string>

namespace ringsync::cuda {
namespace {

Status no_cuda(const char* what) {
  return Status::InvalidArgument(std::string(what) +
                                 ": this ringsync was built without CUDA (nvcc not found at "
                                 "build time); rebuild where the CUDA toolkit is installed to "
                                 "use GPU buffers");
}

}  // namespace

bool compiled_with_cuda() { return false; }

Status available() { return no_cuda("GPU support"); }
bool no_device_here() { return true; }

Result<IpcMapping> open_ipc(const IpcHandle&, const DeviceUuid&, int) {
  return no_cuda("opening a CUDA IPC handle");
}
Status close_ipc(void*, int) { return no_cuda("closing a CUDA IPC mapping"); }
bool peer_reachable(int device, int peer) { return device == peer; }

Result<Stream> Stream::create(int) { return no_cuda("creating a CUDA stream"); }
Stream::Stream(Stream&& other) noexcept : handle_(other.handle_), device_(other.device_) {
  other.handle_ = nullptr;
}
Stream& Stream::operator=(Stream&& other) noexcept {
  handle_ = other.handle_;
  device_ = other.device_;
  other.handle_ = nullptr;
  return *this;
}
Stream::~Stream() = default;
Status Stream::synchronize() { return no_cuda("synchronizing a CUDA stream"); }
Status Stream::wait(Event&) { return no_cuda("making a CUDA stream wait for an event"); }

Result<Event> Event::create(int) { return no_cuda("creating a CUDA event"); }
Event::Event(Event&& other) noexcept : handle_(other.handle_), device_(other.device_) {
  other.handle_ = nullptr;
}
Event& Event::operator=(Event&& other) noexcept {
  handle_ = other.handle_;
  device_ = other.device_;
  other.handle_ = nullptr;
  return *this;
}
Event::~Event() = default;
Status Event::record(Stream&) { return no_cuda("recording a CUDA event"); }
Result<bool> Event::query() { return no_cuda("querying a CUDA event"); }
Status Event::synchronize() { return no_cuda("synchronizing a CUDA event"); }

Status launch_host_callback(Stream&, void (*)(void*), void*) {
  return no_cuda("queueing a CUDA host callback");
}

Status reduce(void*, const void* const*, std::size_t, std::size_t, DType, ReduceOp, Stream&) {
  return no_cuda("reducing device buffers");
}

Status copy_to_host(void*, const void*, std::size_t, Stream&) {
  return no_cuda("copying device memory to the host");
}
Status copy_to_device(void*, const void*, std::size_t, Stream&) {
  return no_cuda("copying host memory to the device");
}
Status copy_device(void*, const void*, std::size_t, Stream&) {
  return no_cuda("copying device memory");
}

Status pin_host(void*, std::size_t) { return no_cuda("pinning host memory"); }
Status unpin_host(void*) { return no_cuda("unpinning host memory"); }

// Without CUDA nothing is device memory as far as this process can tell.
Result<PointerInfo> query_pointer(const void*) { return PointerInfo{}; }

Result<IpcExport> export_ipc(const void*) { return no_cuda("exporting a CUDA IPC handle"); }

}  // namespace ringsync::cuda
