// Device memory as the trainer's CUDA driver sees it: which pointers are GPU
// allocations, what another process needs to map them, and waiting for the
// work queued on them. Behind an interface so the rest of the client (and its
// tests) never needs CUDA; the real one (cuda_driver.cpp) uses the driver the
// process already loaded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "common/status.h"
#include "common/wire.h"

namespace ringsync::client {

// One whole CUDA allocation (a cudaMalloc block) holding some pointer.
struct DeviceAllocation {
  std::uintptr_t base = 0;
  std::size_t bytes = 0;
  int device = -1;  // ordinal in this process
  // The driver's process-wide id of the allocation (CU_POINTER_ATTRIBUTE_BUFFER_ID):
  // memory freed and allocated again at the same address gets a new one.
  std::uint64_t driver_id = 0;
  void* context = nullptr;  // the driver's context of the allocation (opaque)
};

// What the daemon needs to map an allocation.
struct DeviceExport {
  wire::IpcHandleBytes handle{};  // of the allocation base
  wire::DeviceUuid uuid{};        // of its device; all zero when unknown
};

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;

  // The allocation holding ptr, or nullopt for host memory (plain, pinned or
  // managed: the CPU can read all three). Without a CUDA driver in the process
  // every pointer is host memory. An error for device memory that cannot be
  // shared with another process (VMM, memory pools).
  virtual Result<std::optional<DeviceAllocation>> locate(const void* ptr) = 0;

  // The IPC handle of the allocation and its device's UUID.
  virtual Result<DeviceExport> export_allocation(const DeviceAllocation& allocation) = 0;

  // Waits for the device work queued so far that may touch the allocation: only
  // `stream`'s when one is given, otherwise everything in the allocation's context.
  virtual Status synchronize(const DeviceAllocation& allocation, void* stream) = 0;
};

// The process's CUDA driver, shared by every connection. It is never loaded
// here: a process holding device memory has loaded libcuda already, so its
// absence means every pointer is host memory.
std::shared_ptr<DeviceMemory> cuda_driver();

}  // namespace ringsync::client
