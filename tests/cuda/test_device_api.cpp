// device_api.h where there is no GPU (CI, this build machine): every call that needs
// a device fails with an error that says why, nothing crashes; and the check program,
// where nvcc built it, says "no CUDA device" and exits 77 (or passes on a GPU).
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/subprocess.h"
#include "cuda/device_api.h"
#include "cuda/device_chunk_copier.h"

namespace ringsync::cuda {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST_CASE("compiled_with_cuda tells which implementation this build has") {
#ifdef RINGSYNC_HAVE_CUDA
  CHECK(compiled_with_cuda());
#else
  CHECK(!compiled_with_cuda());
#endif
}

TEST_CASE("without a usable device every device call fails with a clear message") {
  const Status status = available();
  if (status.ok()) {
    MESSAGE("a CUDA device is present: the no-device checks do not apply");
    return;
  }
  const std::string why = status.message();
  if (compiled_with_cuda()) {
    CHECK(contains(why, "no CUDA device"));
  } else {
    CHECK(contains(why, "built without CUDA (nvcc not found at build time)"));
  }
  CHECK(!Stream::create(0).ok());
  CHECK(!Event::create(0).ok());
  CHECK(!open_ipc(IpcHandle{}, DeviceUuid{}, 0).ok());
  CHECK(!pin_host(nullptr, 0).ok());
  auto copier = DeviceChunkCopier::create(0);
  REQUIRE(!copier.ok());
  CHECK(!copier.status().message().empty());

  // The stream-taking calls refuse too (a default Stream has no device behind it).
  Stream stream;
  float x = 1.0f;
  const void* srcs[] = {&x};
  CHECK(!reduce(&x, srcs, 1, 1, DType::kF32, ReduceOp::kSum, stream).ok());

  // Host memory is host memory, with or without CUDA.
  auto info = query_pointer(&x);
  REQUIRE(info.ok());
  CHECK(!info->device);
  CHECK(!export_ipc(&x).ok());
}

TEST_CASE("reduce validates its arguments before touching a device") {
  if (!compiled_with_cuda()) return;  // the stub refuses everything alike
  Stream stream;
  float x = 0;
  std::vector<const void*> srcs(kMaxReduceSources + 1, &x);
  CHECK(reduce(&x, srcs.data(), 0, 1, DType::kF32, ReduceOp::kSum, stream).code() ==
        StatusCode::kInvalidArgument);
  CHECK(reduce(&x, srcs.data(), srcs.size(), 1, DType::kF32, ReduceOp::kSum, stream).code() ==
        StatusCode::kInvalidArgument);
  CHECK(reduce(&x, srcs.data(), 1, 1, static_cast<DType>(99), ReduceOp::kSum, stream).code() ==
        StatusCode::kInvalidArgument);
  CHECK(reduce(&x, srcs.data(), 1, 0, DType::kF32, ReduceOp::kSum, stream).ok());  // no-op
}

#ifdef RINGSYNC_CUDA_CHECK
TEST_CASE("ringsync-cuda-check: exit 77 and 'no CUDA device' without a GPU, 0 with one") {
  const auto log = std::filesystem::temp_directory_path() /
                   ("ringsync-cuda-check-" + std::to_string(::getpid()) + ".log");
  // A small run: on a GPU machine this still checks every dtype, op and input count.
  auto child = Child::start({RINGSYNC_CUDA_CHECK, "--quick"}, {}, log.string());
  REQUIRE(child.ok());
  const auto status = child->wait(std::chrono::minutes(5));
  REQUIRE(status.has_value());
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  std::filesystem::remove(log);
  const std::string output = text.str();
  CAPTURE(output);
  REQUIRE(WIFEXITED(*status));
  const int code = WEXITSTATUS(*status);
  if (available().ok()) {
    CHECK(code == 0);
    CHECK(contains(output, "all results match"));
  } else {
    CHECK(code == 77);
    CHECK(contains(output, "no CUDA device: "));
  }
}
#endif

}  // namespace
}  // namespace ringsync::cuda
