// The device work of ringsync-cuda-trainer: a gradient fill and a stand-in for the
// backward pass, so that the trainer keeps the GPU busy between allreduces.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "common/dtype.h"

namespace ringsync::cuda::tools {

// buffer[i] = (rank + 1) * ((i + iteration) % 13), in `dtype` (exact in every dtype,
// so every order of summation gives the same result).
cudaError_t fill_gradient(void* buffer, std::size_t count, DType dtype, int rank, int iteration,
                          cudaStream_t stream);

// Keeps `blocks` blocks spinning for `milliseconds` of GPU time (%globaltimer).
cudaError_t busy_wait(double milliseconds, int blocks, cudaStream_t stream);

}  // namespace ringsync::cuda::tools
