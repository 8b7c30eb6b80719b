/*
 * A stand-in CUDA driver for the Python tests on machines without a GPU: built as
 * libcuda.so.1 and loaded into a test's rank process, it makes ranges of plain host memory
 * that the test declares look like GPU allocations to libringsync (which looks for a loaded
 * libcuda.so* and asks it about every buffer). The daemon never loads it, so it answers a
 * registration as a daemon without a GPU does. Only the calls libringsync makes exist, with
 * the driver API's ABI (CUDA 11+); everything is recorded for the tests to check.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define FAKE_API __attribute__((visibility("default")))

enum { kSuccess = 0, kInvalidValue = 1 };
enum { kAttrContext = 1, kAttrMemoryType = 2, kAttrBufferId = 7, kAttrIsManaged = 8,
       kAttrDeviceOrdinal = 9, kAttrLegacyIpcCapable = 10 };
enum { kMemoryTypeDevice = 2, kMaxRanges = 64 };

struct Range {
  uintptr_t base;
  size_t bytes;
  int ipc_capable;
  unsigned long long id;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct Range ranges[kMaxRanges];
static int range_count;
static unsigned long long next_id;
static int syncs;
static void* last_stream;
static void* const kContext = (void*)0x600d;

static const struct Range* find(uintptr_t p) {
  for (int i = 0; i < range_count; ++i)
    if (p >= ranges[i].base && p - ranges[i].base < ranges[i].bytes) return &ranges[i];
  return NULL;
}

/* ---- for the tests -------------------------------------------------------------------- */

/* Declares [base, base + bytes) one GPU allocation; ipc_capable 0 makes it memory-pool
 * memory, which CUDA IPC cannot share. Returns 0, or -1 when the table is full. */
FAKE_API int fake_cuda_declare(void* base, size_t bytes, int ipc_capable) {
  pthread_mutex_lock(&mu);
  int status = -1;
  if (range_count < kMaxRanges) {
    struct Range r = {(uintptr_t)base, bytes, ipc_capable, ++next_id};
    ranges[range_count++] = r;
    status = 0;
  }
  pthread_mutex_unlock(&mu);
  return status;
}

/* How many stream or context synchronizations libringsync asked for. */
FAKE_API int fake_cuda_syncs(void) { return __atomic_load_n(&syncs, __ATOMIC_SEQ_CST); }

/* The stream of the last cuStreamSynchronize (NULL after a cuCtxSynchronize). */
FAKE_API void* fake_cuda_last_stream(void) {
  return __atomic_load_n(&last_stream, __ATOMIC_SEQ_CST);
}

/* ---- the driver API libringsync uses -------------------------------------------------- */

FAKE_API int cuInit(unsigned flags) {
  (void)flags;
  return kSuccess;
}

FAKE_API int cuPointerGetAttributes(unsigned n, const int* attributes, void** values,
                                    unsigned long long ptr) {
  pthread_mutex_lock(&mu);
  const struct Range* r = find((uintptr_t)ptr);
  for (unsigned i = 0; i < n; ++i) {
    switch (attributes[i]) {
      case kAttrContext: *(void**)values[i] = r ? kContext : NULL; break;
      case kAttrMemoryType: *(unsigned*)values[i] = r ? kMemoryTypeDevice : 0; break;
      case kAttrBufferId: *(unsigned long long*)values[i] = r ? r->id : 0; break;
      case kAttrIsManaged: *(unsigned*)values[i] = 0; break;
      case kAttrDeviceOrdinal: *(int*)values[i] = r ? 0 : -2; break;
      default: break;
    }
  }
  pthread_mutex_unlock(&mu);
  return kSuccess;
}

FAKE_API int cuPointerGetAttribute(void* data, int attribute, unsigned long long ptr) {
  pthread_mutex_lock(&mu);
  const struct Range* r = find((uintptr_t)ptr);
  int status = kInvalidValue;
  if (r && attribute == kAttrLegacyIpcCapable) {
    *(unsigned*)data = (unsigned)r->ipc_capable;
    status = kSuccess;
  }
  pthread_mutex_unlock(&mu);
  return status;
}

FAKE_API int cuMemGetAddressRange_v2(unsigned long long* base, size_t* size,
                                     unsigned long long ptr) {
  pthread_mutex_lock(&mu);
  const struct Range* r = find((uintptr_t)ptr);
  if (r) {
    if (base) *base = r->base;
    if (size) *size = r->bytes;
  }
  pthread_mutex_unlock(&mu);
  return r ? kSuccess : kInvalidValue;
}

FAKE_API int cuIpcGetMemHandle(void* handle, unsigned long long ptr) {
  memset(handle, 0, 64);
  memcpy(handle, &ptr, sizeof(ptr));
  return kSuccess;
}

FAKE_API int cuCtxPushCurrent_v2(void* context) {
  (void)context;
  return kSuccess;
}

FAKE_API int cuCtxPopCurrent_v2(void** context) {
  if (context) *context = kContext;
  return kSuccess;
}

FAKE_API int cuCtxSynchronize(void) {
  __atomic_store_n(&last_stream, NULL, __ATOMIC_SEQ_CST);
  __atomic_add_fetch(&syncs, 1, __ATOMIC_SEQ_CST);
  return kSuccess;
}

FAKE_API int cuStreamSynchronize(void* stream) {
  __atomic_store_n(&last_stream, stream, __ATOMIC_SEQ_CST);
  __atomic_add_fetch(&syncs, 1, __ATOMIC_SEQ_CST);
  return kSuccess;
}

FAKE_API int cuDeviceGet(int* device, int ordinal) {
  *device = ordinal;
  return kSuccess;
}

FAKE_API int cuDeviceGetUuid_v2(unsigned char* uuid, int device) {
  memset(uuid, 0xfa, 16);
  uuid[0] = (unsigned char)device;
  return kSuccess;
}

FAKE_API int cuGetErrorString(int error, const char** text) {
  *text = error == kSuccess ? "no error" : "fake CUDA driver error";
  return kSuccess;
}
