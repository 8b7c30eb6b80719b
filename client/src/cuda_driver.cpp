// DeviceMemory over the CUDA driver API, reached through dlsym: libringsync
// links no CUDA library (it loads on machines without one), and it never loads
// libcuda either: a process that holds device memory has loaded it already, so
// until the process has, every pointer is host memory. The few types and
// prototypes used are declared here; their ABI has not changed since CUDA 4.
#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "client/src/device_memory.h"
#include "common/log.h"

namespace ringsync::client {
namespace {

using CUresult = int;
using CUdeviceptr = unsigned long long;
using CUcontext = void*;
using CUdevice = int;
using CUstream = void*;
struct CUipcMemHandle {
  char reserved[64];
};
struct CUuuid {
  char bytes[16];
};
static_assert(sizeof(CUipcMemHandle) == wire::kIpcHandleBytes);
static_assert(sizeof(CUuuid) == wire::kDeviceUuidBytes);

constexpr CUresult kSuccess = 0;
// CUpointer_attribute and CUmemorytype values from cuda.h.
enum PointerAttribute : int {
  kContext = 1,
  kMemoryType = 2,
  kBufferId = 7,
  kIsManaged = 8,
  kDeviceOrdinal = 9,
  kLegacyIpcCapable = 10,
};
constexpr unsigned kMemoryTypeDevice = 2;

struct Api {
  CUresult (*init)(unsigned);
  CUresult (*pointer_get_attributes)(unsigned, PointerAttribute*, void**, CUdeviceptr);
  CUresult (*pointer_get_attribute)(void*, PointerAttribute, CUdeviceptr);
  CUresult (*mem_get_address_range)(CUdeviceptr*, std::size_t*, CUdeviceptr);
  CUresult (*ipc_get_mem_handle)(CUipcMemHandle*, CUdeviceptr);
  CUresult (*ctx_push_current)(CUcontext);
  CUresult (*ctx_pop_current)(CUcontext*);
  CUresult (*ctx_synchronize)();
  CUresult (*stream_synchronize)(CUstream);
  CUresult (*device_get)(CUdevice*, int);
  CUresult (*device_get_uuid)(CUuuid*, CUdevice);         // optional
  CUresult (*get_error_string)(CUresult, const char**);  // optional
};

std::string hex(std::uint64_t address) {
  char text[24];
  std::snprintf(text, sizeof(text), "0x%llx", static_cast<unsigned long long>(address));
  return text;
}

// ---- finding the driver -------------------------------------------------------

struct Search {
  unsigned long long adds_seen = 0;
  unsigned long long adds_now = 0;
  bool unchanged = false;
  std::string path;
};

// dl_iterate_phdr callback: finds a loaded libcuda.so*, and stops at once when
// no library was loaded since the last search (dlpi_adds counts the loads).
int visit(dl_phdr_info* info, std::size_t size, void* data) {
  auto* search = static_cast<Search*>(data);
  if (size >= offsetof(dl_phdr_info, dlpi_adds) + sizeof(info->dlpi_adds)) {
    if (info->dlpi_adds == search->adds_seen) {
      search->unchanged = true;
      return 1;
    }
    search->adds_now = info->dlpi_adds;
  }
  const char* name = info->dlpi_name ? info->dlpi_name : "";
  const char* slash = std::strrchr(name, '/');
  const char* base = slash ? slash + 1 : name;
  if (std::strncmp(base, "libcuda.so", 10) != 0) return 0;
  search->path = name;
  return 1;
}

template <typename F>
bool bind(void* handle, const char* symbol, F& into) {
  into = reinterpret_cast<F>(dlsym(handle, symbol));
  return into != nullptr;
}

class Driver final : public DeviceMemory {
 public:
  Result<std::optional<DeviceAllocation>> locate(const void* ptr) override;
  Result<DeviceExport> export_allocation(const DeviceAllocation& allocation) override;
  Status synchronize(const DeviceAllocation& allocation, void* stream) override;

 private:
  // The driver once the process has loaded a usable one; nullptr until then.
  const Api* api();
  // Looks for a loaded libcuda; called under mu_.
  void try_load();
  std::string error_text(const Api& api, const char* call, CUresult r) const;

  std::atomic<const Api*> api_{nullptr};
  std::mutex mu_;
  unsigned long long adds_seen_ = ~0ull;
  bool gave_up_ = false;  // loaded but unusable: no device, so no device memory
};

const Api* Driver::api() {
  if (const Api* a = api_.load(std::memory_order_acquire)) return a;
  std::lock_guard lock(mu_);
  if (!api_.load(std::memory_order_relaxed) && !gave_up_) try_load();
  return api_.load(std::memory_order_relaxed);
}

void Driver::try_load() {
  Search search;
  search.adds_seen = adds_seen_;
  dl_iterate_phdr(visit, &search);
  if (search.unchanged) return;
  adds_seen_ = search.adds_now;
  if (search.path.empty()) return;

  void* handle = dlopen(search.path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (!handle) return;
  auto api = std::make_unique<Api>();
  const bool complete =
      bind(handle, "cuInit", api->init) &&
      bind(handle, "cuPointerGetAttributes", api->pointer_get_attributes) &&
      bind(handle, "cuPointerGetAttribute", api->pointer_get_attribute) &&
      bind(handle, "cuMemGetAddressRange_v2", api->mem_get_address_range) &&
      bind(handle, "cuIpcGetMemHandle", api->ipc_get_mem_handle) &&
      bind(handle, "cuCtxPushCurrent_v2", api->ctx_push_current) &&
      bind(handle, "cuCtxPopCurrent_v2", api->ctx_pop_current) &&
      bind(handle, "cuCtxSynchronize", api->ctx_synchronize) &&
      bind(handle, "cuStreamSynchronize", api->stream_synchronize) &&
      bind(handle, "cuDeviceGet", api->device_get);
  if (!bind(handle, "cuDeviceGetUuid_v2", api->device_get_uuid))
    bind(handle, "cuDeviceGetUuid", api->device_get_uuid);
  bind(handle, "cuGetErrorString", api->get_error_string);
  if (!complete) {
    RS_LOG(warn, "client") << search.path << " lacks CUDA driver functions ringsync needs (CUDA "
                           << "11 or newer); GPU pointers will not be recognized";
    gave_up_ = true;
    return;
  }
  // Whoever loaded the driver initialized it already; this is cheap then.
  if (CUresult r = api->init(0); r != kSuccess) {
    RS_LOG(info, "client") << "the CUDA driver reports no usable device ("
                           << error_text(*api, "cuInit", r) << "); every pointer is host memory";
    gave_up_ = true;
    return;
  }
  RS_LOG(debug, "client") << "using the CUDA driver at " << search.path;
  api_.store(api.release(), std::memory_order_release);  // lives as long as the process
}

std::string Driver::error_text(const Api& api, const char* call, CUresult r) const {
  const char* text = nullptr;
  if (api.get_error_string) api.get_error_string(r, &text);
  return std::string(call) + " failed with CUDA error " + std::to_string(r) +
         (text ? std::string(" (") + text + ")" : std::string());
}

// Makes a context current for the lifetime of the guard (CUDA calls on another
// thread than the one that allocated need it).
class CurrentContext {
 public:
  CurrentContext(const Api& api, CUcontext context) : api_(api) {
    pushed_ = context && api.ctx_push_current(context) == kSuccess;
  }
  ~CurrentContext() {
    CUcontext popped = nullptr;
    if (pushed_) api_.ctx_pop_current(&popped);
  }
  CurrentContext(const CurrentContext&) = delete;
  CurrentContext& operator=(const CurrentContext&) = delete;

 private:
  const Api& api_;
  bool pushed_ = false;
};

Result<std::optional<DeviceAllocation>> Driver::locate(const void* ptr) {
  const Api* a = api();
  if (!a || !ptr) return std::optional<DeviceAllocation>();
  const auto address = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(ptr));
  // Zeroed wide slots: the driver writes 4-byte enums and booleans into them.
  std::uint64_t memory_type = 0, managed = 0, buffer_id = 0;
  int ordinal = -1;
  CUcontext context = nullptr;
  PointerAttribute attributes[] = {kMemoryType, kIsManaged, kBufferId, kDeviceOrdinal, kContext};
  void* values[] = {&memory_type, &managed, &buffer_id, &ordinal, &context};
  // Unlike cuPointerGetAttribute, this succeeds with zeros for memory CUDA
  // never saw (plain host memory).
  if (CUresult r = a->pointer_get_attributes(5, attributes, values, address); r != kSuccess)
    return Status::InvalidArgument("cannot tell whether " + hex(address) +
                                   " is GPU memory: " +
                                   error_text(*a, "cuPointerGetAttributes", r));
  // Managed memory is readable by the CPU: it takes the host path.
  if (static_cast<std::uint32_t>(memory_type) != kMemoryTypeDevice || managed != 0)
    return std::optional<DeviceAllocation>();

  std::uint64_t ipc_capable = 1;
  if (a->pointer_get_attribute(&ipc_capable, kLegacyIpcCapable, address) == kSuccess &&
      ipc_capable == 0)
    return Status::InvalidArgument(
        "GPU memory at " + hex(address) +
        " comes from the virtual memory API or a memory pool (cuMemCreate, cudaMallocAsync, "
        "PyTorch expandable segments), which CUDA IPC cannot share with ringsyncd; allocate it "
        "with cudaMalloc (PyTorch: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False)");
  CUdeviceptr base = 0;
  std::size_t size = 0;
  {
    CurrentContext current(*a, context);
    if (CUresult r = a->mem_get_address_range(&base, &size, address); r != kSuccess)
      return Status::InvalidArgument("GPU memory at " + hex(address) + ": " +
                                     error_text(*a, "cuMemGetAddressRange", r));
  }
  DeviceAllocation allocation;
  allocation.base = static_cast<std::uintptr_t>(base);
  allocation.bytes = size;
  allocation.device = ordinal;
  allocation.driver_id = buffer_id;
  allocation.context = context;
  return std::optional<DeviceAllocation>(allocation);
}

Result<DeviceExport> Driver::export_allocation(const DeviceAllocation& allocation) {
  const Api* a = api();
  if (!a) return Status::Internal("exporting GPU memory without a CUDA driver");
  DeviceExport out;
  CurrentContext current(*a, allocation.context);
  CUipcMemHandle handle{};
  if (CUresult r = a->ipc_get_mem_handle(&handle, static_cast<CUdeviceptr>(allocation.base));
      r != kSuccess)
    return Status::InvalidArgument("cannot share the GPU allocation at " +
                                   hex(allocation.base) + " with ringsyncd: " +
                                   error_text(*a, "cuIpcGetMemHandle", r));
  std::memcpy(out.handle.data(), handle.reserved, sizeof(handle.reserved));
  CUdevice device = 0;
  CUuuid uuid{};
  if (a->device_get_uuid && a->device_get(&device, allocation.device) == kSuccess &&
      a->device_get_uuid(&uuid, device) == kSuccess)
    std::memcpy(out.uuid.data(), uuid.bytes, sizeof(uuid.bytes));
  return out;
}

Status Driver::synchronize(const DeviceAllocation& allocation, void* stream) {
  const Api* a = api();
  if (!a) return Status::Internal("synchronizing GPU work without a CUDA driver");
  CurrentContext current(*a, allocation.context);
  const CUresult r = stream ? a->stream_synchronize(stream) : a->ctx_synchronize();
  if (r != kSuccess)
    return Status::InvalidArgument(
        "waiting for the GPU work on the buffers before the collective: " +
        error_text(*a, stream ? "cuStreamSynchronize" : "cuCtxSynchronize", r));
  return Status::Ok();
}

}  // namespace

std::shared_ptr<DeviceMemory> cuda_driver() {
  static const auto driver = std::make_shared<Driver>();
  return driver;
}

}  // namespace ringsync::client
