// Launching the device reduction kernels (reduce_kernels.cu). device_api_cuda.cpp
// validates the arguments; this file only chooses the kernel and the grid.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "common/dtype.h"

namespace ringsync::cuda {

// dst[i] = op(srcs[0][i], ..., srcs[nsrc-1][i]) for i < count, queued on `stream` of
// `device` (the current device). Preconditions: 1 <= nsrc <= kMaxReduceSources,
// count >= 1, valid dtype and op. Returns the launch error, if any.
cudaError_t launch_reduce(void* dst, const void* const* srcs, std::size_t nsrc, std::size_t count,
                          DType dtype, ReduceOp op, cudaStream_t stream, int device);

}  // namespace ringsync::cuda
