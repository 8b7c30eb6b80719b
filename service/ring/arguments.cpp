#include "service/ring/arguments.h"

#include <cstdint>
#include <limits>
#include <string>

namespace ringsync::service::ring {

namespace {

std::string prefix(std::string_view algorithm) { return "ring " + std::string(algorithm) + ": "; }

}  // namespace

Status check_options(std::string_view algorithm, const RingOptions& options, std::size_t steps,
                     bool reads_input) {
  if (options.input != nullptr && !reads_input) {
    return Status::InvalidArgument(prefix(algorithm) +
                                   "reads its input from its buffer; gather the input there and "
                                   "pass no separate input");
  }
  if (options.input != nullptr && options.gate != nullptr) {
    return Status::InvalidArgument(prefix(algorithm) +
                                   "has both a stage gate and a separate input; a gate fills the "
                                   "buffer with the input, so pass one of them");
  }
  if (options.chunk_bytes == 0) {
    return Status::InvalidArgument(prefix(algorithm) +
                                   "chunk_bytes is 0; pass the largest message size in bytes "
                                   "(at least one element)");
  }
  if (options.window == 0) {
    return Status::InvalidArgument(prefix(algorithm) +
                                   "window is 0; pass how many chunks may be in flight each way "
                                   "(at least 1)");
  }
  constexpr std::size_t kTagSteps = std::size_t{std::numeric_limits<std::uint16_t>::max()} + 1;
  if (options.first_step + steps > kTagSteps) {
    return Status::InvalidArgument(prefix(algorithm) + "needs tag steps " +
                                   std::to_string(options.first_step) + ".." +
                                   std::to_string(options.first_step + steps - 1) +
                                   " but a tag holds steps up to 65535; the ring has too many "
                                   "nodes for this collective");
  }
  return Status::Ok();
}

Status check_input(std::string_view algorithm, const void* input, const void* data, std::size_t count,
                   DType dtype) {
  if (input == nullptr || input == data || count == 0) return Status::Ok();
  const auto in = reinterpret_cast<std::uintptr_t>(input);
  const auto out = reinterpret_cast<std::uintptr_t>(data);
  const std::size_t bytes = count * dtype_size(dtype);
  if (in < out + bytes && out < in + bytes) {
    return Status::InvalidArgument(prefix(algorithm) +
                                   "the input overlaps the buffer without being it; pass disjoint "
                                   "buffers, or the buffer alone (in place)");
  }
  return Status::Ok();
}

Status check_buffer(std::string_view algorithm, const void* data, std::size_t count, DType dtype) {
  if (!is_valid(dtype)) {
    return Status::InvalidArgument(prefix(algorithm) + "unknown dtype " +
                                   std::to_string(static_cast<int>(dtype)));
  }
  if (count > std::numeric_limits<std::size_t>::max() / dtype_size(dtype)) {
    return Status::InvalidArgument(prefix(algorithm) + "count " + std::to_string(count) + " of " +
                                   std::string(dtype_name(dtype)) + " does not fit in memory");
  }
  if (data == nullptr && count != 0) {
    return Status::InvalidArgument(prefix(algorithm) + "buffer is null but count is " +
                                   std::to_string(count) + "; pass the buffer's address");
  }
  return Status::Ok();
}

Status check_reduction(std::string_view algorithm, ReduceOp op, std::size_t divisor) {
  if (!is_valid(op)) {
    return Status::InvalidArgument(prefix(algorithm) + "unknown reduction op " +
                                   std::to_string(static_cast<int>(op)));
  }
  if (op == ReduceOp::kAvg && divisor == 0) {
    return Status::InvalidArgument(prefix(algorithm) +
                                   "avg with divisor 0; pass the number of contributions "
                                   "(ranks in the job)");
  }
  return Status::Ok();
}

}  // namespace ringsync::service::ring
