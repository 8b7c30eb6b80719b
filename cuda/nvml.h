// NVML, loaded at run time: dlopen("libnvidia-ml.so.1") and the few functions the GPU
// metrics need, declared here (no NVML header, no link-time dependency). A machine
// without the library or without a GPU simply has no Nvml.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace ringsync::cuda {

// The library ringsyncd loads: $RINGSYNC_NVML_LIBRARY when set, else this soname.
inline constexpr const char* kNvmlLibrary = "libnvidia-ml.so.1";
std::string nvml_library_path();

// One GPU's readings; a reading the device does not support is absent.
struct GpuReading {
  unsigned index = 0;
  std::string uuid;                       // "GPU-8b5c..."
  std::optional<double> utilization;      // 0..1: time a kernel ran over the last sample period
  std::optional<std::uint64_t> memory_used_bytes;
  std::optional<double> pcie_tx_bytes_per_second;  // to the host
  std::optional<double> pcie_rx_bytes_per_second;  // from the host
};

class Nvml {
 public:
  // Loads `library` (empty: nvml_library_path()) and initializes NVML. Errors say
  // which step failed ("dlopen libnvidia-ml.so.1: ...", "nvmlInit_v2: ...").
  static Result<std::unique_ptr<Nvml>> load(std::string_view library = {});
  ~Nvml();  // nvmlShutdown, dlclose
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  const std::string& library() const { return library_; }
  Result<unsigned> device_count();
  // Reads GPU `index`: fails only when the device itself cannot be reached or named.
  Result<GpuReading> read(unsigned index);

 private:
  struct Api;
  Nvml(void* handle, std::string library, std::unique_ptr<Api> api);
  std::string error_text(int code) const;

  void* handle_;
  std::string library_;
  std::unique_ptr<Api> api_;
};

}  // namespace ringsync::cuda
