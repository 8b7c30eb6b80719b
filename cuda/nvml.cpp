#include "cuda/nvml.h"

#include <dlfcn.h>

#include <cstdlib>
#include <string>
#include <type_traits>
#include <utility>

namespace ringsync::cuda {
namespace {

// The slice of nvml.h this file uses, as NVML defines it (stable C ABI).
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t NVML_SUCCESS = 0;
struct nvmlUtilization_t {
  unsigned int gpu;     // percent of time a kernel was running
  unsigned int memory;  // percent of time memory was read or written
};
struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
enum nvmlPcieUtilCounter_t : int { NVML_PCIE_UTIL_TX_BYTES = 0, NVML_PCIE_UTIL_RX_BYTES = 1 };
constexpr unsigned kUuidBufferSize = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE

}  // namespace

struct Nvml::Api {
  nvmlReturn_t (*init)();
  nvmlReturn_t (*shutdown)();
  const char* (*error_string)(nvmlReturn_t);
  nvmlReturn_t (*device_count)(unsigned*);
  nvmlReturn_t (*handle_by_index)(unsigned, nvmlDevice_t*);
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned);
  nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t*);
  nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*);
  nvmlReturn_t (*pcie_throughput)(nvmlDevice_t, nvmlPcieUtilCounter_t, unsigned*);  // KiB/s
};

std::string nvml_library_path() {
  const char* env = std::getenv("RINGSYNC_NVML_LIBRARY");
  return env != nullptr && *env != '\0' ? env : kNvmlLibrary;
}

Result<std::unique_ptr<Nvml>> Nvml::load(std::string_view library) {
  const std::string path = library.empty() ? nvml_library_path() : std::string(library);
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    return Status::InvalidArgument("dlopen " + path + ": " + (why ? why : "failed"));
  }
  auto api = std::make_unique<Api>();
  std::string missing;
  const auto bind = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(handle, name));
    if (fn == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(name);
  };
  bind(api->init, "nvmlInit_v2");
  bind(api->shutdown, "nvmlShutdown");
  bind(api->error_string, "nvmlErrorString");
  bind(api->device_count, "nvmlDeviceGetCount_v2");
  bind(api->handle_by_index, "nvmlDeviceGetHandleByIndex_v2");
  bind(api->uuid, "nvmlDeviceGetUUID");
  bind(api->utilization, "nvmlDeviceGetUtilizationRates");
  bind(api->memory, "nvmlDeviceGetMemoryInfo");
  bind(api->pcie_throughput, "nvmlDeviceGetPcieThroughput");
  if (!missing.empty()) {
    ::dlclose(handle);
    return Status::InvalidArgument(path + " lacks " + missing);
  }
  const nvmlReturn_t init = api->init();
  if (init != NVML_SUCCESS) {
    const char* text = api->error_string(init);
    std::string why = "nvmlInit_v2: " +
                      (text != nullptr ? std::string(text) : "NVML error " + std::to_string(init));
    ::dlclose(handle);
    return Status::InvalidArgument(why);
  }
  return std::unique_ptr<Nvml>(new Nvml(handle, path, std::move(api)));
}

Nvml::Nvml(void* handle, std::string library, std::unique_ptr<Api> api)
    : handle_(handle), library_(std::move(library)), api_(std::move(api)) {}

Nvml::~Nvml() {
  api_->shutdown();
  ::dlclose(handle_);
}

std::string Nvml::error_text(int code) const {
  const char* text = api_->error_string(code);
  return text != nullptr ? text : "NVML error " + std::to_string(code);
}

Result<unsigned> Nvml::device_count() {
  unsigned count = 0;
  const nvmlReturn_t r = api_->device_count(&count);
  if (r != NVML_SUCCESS) return Status::Internal("nvmlDeviceGetCount_v2: " + error_text(r));
  return count;
}

Result<GpuReading> Nvml::read(unsigned index) {
  nvmlDevice_t device = nullptr;
  nvmlReturn_t r = api_->handle_by_index(index, &device);
  if (r != NVML_SUCCESS)
    return Status::Internal("nvmlDeviceGetHandleByIndex_v2(" + std::to_string(index) +
                            "): " + error_text(r));
  char uuid[kUuidBufferSize] = {};
  r = api_->uuid(device, uuid, sizeof(uuid));
  if (r != NVML_SUCCESS)
    return Status::Internal("nvmlDeviceGetUUID(" + std::to_string(index) + "): " + error_text(r));
  GpuReading reading;
  reading.index = index;
  reading.uuid = uuid;
  nvmlUtilization_t utilization{};
  if (api_->utilization(device, &utilization) == NVML_SUCCESS)
    reading.utilization = utilization.gpu / 100.0;
  nvmlMemory_t memory{};
  if (api_->memory(device, &memory) == NVML_SUCCESS) reading.memory_used_bytes = memory.used;
  unsigned kib = 0;
  if (api_->pcie_throughput(device, NVML_PCIE_UTIL_TX_BYTES, &kib) == NVML_SUCCESS)
    reading.pcie_tx_bytes_per_second = kib * 1024.0;
  if (api_->pcie_throughput(device, NVML_PCIE_UTIL_RX_BYTES, &kib) == NVML_SUCCESS)
    reading.pcie_rx_bytes_per_second = kib * 1024.0;
  return reading;
}

}  // namespace ringsync::cuda
