// CPU lists as `taskset -c` takes them and /proc/<pid>/status shows them
// (Cpus_allowed_list): "3", "0-3,8". Parsed into sorted, distinct CPU numbers.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace ringsync {

// The highest CPU number a list may name (Linux's largest NR_CPUS - 1).
inline constexpr int kMaxCpu = 8191;

// "3", "0-3,8": numbers and inclusive ranges, comma separated, no spaces
// (taskset's strides, "0-7:2", are not taken).
// An empty text, a malformed entry, a range that runs backwards or a CPU above
// kMaxCpu is an InvalidArgument naming the entry.
Result<std::vector<int>> parse_cpu_list(std::string_view text);

// The shortest list naming `cpus` (sorted, distinct): {0,1,2,3,8} -> "0-3,8".
std::string format_cpu_list(const std::vector<int>& cpus);

}  // namespace ringsync
