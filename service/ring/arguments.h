// The argument checks every ring task's post() shares, with messages that say
// what was wrong and what to pass instead.
#pragma once

#include <cstddef>
#include <string_view>

#include "common/dtype.h"
#include "common/status.h"
#include "service/ring/task.h"

namespace ringsync::service::ring {

// Options for a task that uses `steps` tag steps from options.first_step on;
// `reads_input`: the task reads options.input (others refuse one).
Status check_options(std::string_view algorithm, const RingOptions& options, std::size_t steps,
                     bool reads_input = false);

// An out-of-place input (options.input) of `count` elements beside `data`:
// the buffer itself or disjoint from it.
Status check_input(std::string_view algorithm, const void* input, const void* data, std::size_t count,
                   DType dtype);

// A buffer of `count` elements of `dtype` at `data` (null only when count is 0).
Status check_buffer(std::string_view algorithm, const void* data, std::size_t count, DType dtype);

// A reduction operator; avg also needs divisor >= 1 (the number of contributions).
Status check_reduction(std::string_view algorithm, ReduceOp op, std::size_t divisor);

}  // namespace ringsync::service::ring
