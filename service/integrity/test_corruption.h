// Test only: a stand-in for a bad memory cell, so tests can see the result
// check catch one. RINGSYNC_TEST_CORRUPT_RESULT=<node rank> in a daemon's
// environment makes it, wherever it is that node of a multi-node job, flip one
// bit of every result it checks (the first byte the check reads) after the
// ring and before the check. The daemon warns at start-up when it is set.
// Never set it outside tests.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace ringsync::service::integrity {

inline constexpr std::string_view kCorruptResultEnv = "RINGSYNC_TEST_CORRUPT_RESULT";

// The node rank the environment names, read once; nullopt when unset or not a number.
std::optional<std::uint32_t> corrupt_result_node();

}  // namespace ringsync::service::integrity
