// ringsync-cuda-ipc-probe: can two processes on this machine share GPU memory
// through CUDA IPC (cudaIpcGetMemHandle / cudaIpcOpenMemHandle), as a trainer and
// its ringsyncd do? Asks the CUDA runtime directly, not ringsync's own code, so
// that gpu-check.sh can tell a platform without IPC (sandboxed GPU runtimes, some
// container setups) from a bug of ours:
//   the parent allocates device memory, fills it with a pattern and sends the
//   handle through a pipe; a child process (forked before CUDA starts) opens the
//   handle, copies the memory back and checks the pattern.
// Exit 0: IPC works; 77: no CUDA device, or IPC is refused here (the reason is
// printed); 1: something else failed.
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <vector>

namespace {

constexpr unsigned char kPattern = 0x5a;
constexpr std::size_t kBytes = 1 << 20;

bool read_all(int fd, void* data, std::size_t bytes) {
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = read(fd, p, bytes);
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
  return true;
}

// The child: opens the parent's handle and says what it found, as one line on
// `report` ("ok" or the reason).
int child(int handles, int report) {
  cudaIpcMemHandle_t handle;
  if (!read_all(handles, &handle, sizeof handle)) return 1;
  char line[512] = "ok";
  void* mapped = nullptr;
  cudaError_t e = cudaIpcOpenMemHandle(&mapped, handle, cudaIpcMemLazyEnablePeerAccess);
  if (e != cudaSuccess) {
    std::snprintf(line, sizeof line, "cudaIpcOpenMemHandle in a second process: %s (%s)",
                  cudaGetErrorString(e), cudaGetErrorName(e));
  } else {
    std::vector<unsigned char> host(kBytes);
    e = cudaMemcpy(host.data(), mapped, kBytes, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess)
      std::snprintf(line, sizeof line, "reading the mapped memory: %s", cudaGetErrorString(e));
    else
      for (std::size_t i = 0; i < kBytes; ++i)
        if (host[i] != kPattern) {
          std::snprintf(line, sizeof line, "WRONG DATA: byte %zu of the mapped memory is %u, not %u", i,
                        host[i], kPattern);
          break;
        }
    cudaIpcCloseMemHandle(mapped);
  }
  const std::size_t n = std::strlen(line);
  return write(report, line, n) == static_cast<ssize_t>(n) ? 0 : 1;
}

}  // namespace

int main() {
  int to_child[2], from_child[2];
  if (pipe(to_child) != 0 || pipe(from_child) != 0) return 1;
  const pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    close(to_child[1]);
    close(from_child[0]);
    _exit(child(to_child[0], from_child[1]));
  }
  close(to_child[0]);
  close(from_child[1]);
  int status = 1;
  void* memory = nullptr;
  cudaIpcMemHandle_t handle;
  cudaError_t e = cudaMalloc(&memory, kBytes);
  if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver) {
    std::printf("SKIP: no usable CUDA device: %s\n", cudaGetErrorString(e));
    close(to_child[1]);
    waitpid(pid, nullptr, 0);
    return 77;
  }
  if (e == cudaSuccess) e = cudaMemset(memory, kPattern, kBytes);
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e == cudaSuccess) e = cudaIpcGetMemHandle(&handle, memory);
  if (e != cudaSuccess) {
    std::printf("SKIP: CUDA IPC is not available here: cudaIpcGetMemHandle: %s (%s)\n",
                cudaGetErrorString(e), cudaGetErrorName(e));
    status = 77;
  } else if (write(to_child[1], &handle, sizeof handle) == static_cast<ssize_t>(sizeof handle)) {
    char line[512] = {};
    const ssize_t n = read(from_child[0], line, sizeof line - 1);
    if (n > 0 && std::strcmp(line, "ok") == 0) {
      std::printf("PASS: a second process mapped 1 MiB of this one's device memory and read it back\n");
      status = 0;
    } else if (n > 0 && std::strncmp(line, "WRONG DATA", 10) == 0) {
      std::printf("FAIL: %s\n", line);
      status = 1;
    } else {
      std::printf("SKIP: CUDA IPC is not available here: %s\n", n > 0 ? line : "the second process died");
      status = 77;
    }
  }
  close(to_child[1]);
  int child_status = 0;
  waitpid(pid, &child_status, 0);
  if (memory != nullptr) cudaFree(memory);
  return status;
}
