// A stand-in for libnvidia-ml.so.1 with known readings, for test_cuda:
//   GPU 0: GPU-00000000-1111-2222-3333-444444444444, 37 % busy, 1234567890 bytes used,
//          PCIe tx 1000 KiB/s, rx 2000 KiB/s;
//   GPU 1: GPU-55555555-6666-7777-8888-999999999999, 100 % busy, 42 bytes used,
//          PCIe throughput not supported (as on some virtual GPUs).
// FAKE_NVML_DEVICES=N reports N GPUs (0..2); FAKE_NVML_INIT=fail makes nvmlInit_v2
// fail as it does on a machine without the driver.
#include <cstdlib>
#include <cstring>

namespace {

constexpr int kSuccess = 0;
constexpr int kInvalidArgument = 2;
constexpr int kNotSupported = 3;
constexpr int kDriverNotLoaded = 9;

struct FakeDevice {
  const char* uuid;
  unsigned utilization;
  unsigned long long used;
  bool pcie;
  unsigned tx_kib;
  unsigned rx_kib;
};

FakeDevice g_devices[2] = {
    {"GPU-00000000-1111-2222-3333-444444444444", 37, 1234567890ull, true, 1000, 2000},
    {"GPU-55555555-6666-7777-8888-999999999999", 100, 42ull, false, 0, 0},
};

unsigned device_count() {
  const char* env = std::getenv("FAKE_NVML_DEVICES");
  if (env == nullptr) return 2;
  const int n = std::atoi(env);
  return n < 0 ? 0 : (n > 2 ? 2 : static_cast<unsigned>(n));
}

FakeDevice* as_device(void* handle) {
  for (auto& d : g_devices)
    if (handle == &d) return &d;
  return nullptr;
}

struct Utilization {
  unsigned gpu;
  unsigned memory;
};
struct Memory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int nvmlInit_v2() {
  const char* env = std::getenv("FAKE_NVML_INIT");
  return env != nullptr && std::strcmp(env, "fail") == 0 ? kDriverNotLoaded : kSuccess;
}

__attribute__((visibility("default"))) int nvmlShutdown() { return kSuccess; }

__attribute__((visibility("default"))) const char* nvmlErrorString(int code) {
  switch (code) {
    case kSuccess: return "Success";
    case kInvalidArgument: return "Invalid Argument";
    case kNotSupported: return "Not Supported";
    case kDriverNotLoaded: return "Driver Not Loaded";
  }
  return "Unknown Error";
}

__attribute__((visibility("default"))) int nvmlDeviceGetCount_v2(unsigned* count) {
  *count = device_count();
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetHandleByIndex_v2(unsigned index,
                                                                        void** device) {
  if (index >= device_count()) return kInvalidArgument;
  *device = &g_devices[index];
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetUUID(void* device, char* uuid,
                                                            unsigned length) {
  FakeDevice* d = as_device(device);
  if (d == nullptr || std::strlen(d->uuid) + 1 > length) return kInvalidArgument;
  std::strcpy(uuid, d->uuid);
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetUtilizationRates(void* device,
                                                                        Utilization* out) {
  FakeDevice* d = as_device(device);
  if (d == nullptr) return kInvalidArgument;
  out->gpu = d->utilization;
  out->memory = d->utilization / 2;
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetMemoryInfo(void* device, Memory* out) {
  FakeDevice* d = as_device(device);
  if (d == nullptr) return kInvalidArgument;
  out->total = 141ull << 30;
  out->used = d->used;
  out->free = out->total - d->used;
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetPcieThroughput(void* device, int counter,
                                                                      unsigned* value) {
  FakeDevice* d = as_device(device);
  if (d == nullptr) return kInvalidArgument;
  if (!d->pcie) return kNotSupported;
  *value = counter == 0 ? d->tx_kib : d->rx_kib;
  return kSuccess;
}

}  // extern "C"
