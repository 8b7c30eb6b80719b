// The argument checks every ring task's post() shares, with messages that say
// what was wrong and what to pass instead.
#pragma once

#include <cstddef>
#include <string_view>

#include "common/dtype.h"
#include "common/status.h"
#include "service/ring/task.h"

namespace ringsync::service::ring {

// Options for a task that uses `steps` tag steps from options.first_step on.
Status check_options(std::string_view algorithm, const RingOptions& options, std::size_t steps);

// A buffer of `count` elements of `dtype` at `data` (null only when count is 0).
Status check_buffer(std::string_view algorithm, const void* data, std::size_t count, DType dtype);

// A reduction operator; avg also needs divisor >= 1 (the number of contributions).
Status check_reduction(std::string_view algorithm, ReduceOp op, std::size_t divisor);

}  // namespace ringsync::service::ring
