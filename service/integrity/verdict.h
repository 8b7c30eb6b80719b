// Comparing what every node read of a shared result (checked_ranges.h).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/dtype.h"
#include "common/status.h"
#include "service/integrity/verify_results.h"

namespace ringsync::service::integrity {

// The word a node sends the others: the mode it checked with (high half) and
// its digest (low half). Carrying the mode turns nodes started with different
// --verify-results into a clear configuration error instead of a false alarm.
std::uint64_t check_word(VerifyResults mode, std::uint32_t digest);

// Ok when every node's word (words[n] is node n's) is the same. Otherwise a
// Mismatch for `collective` ("allreduce 'grad'") that names the nodes whose
// digest differs from the majority's, or every node when no digest has a
// strict majority (two nodes, say: the check cannot tell which copy is wrong),
// and says what to check.
Status compare_results(const std::vector<std::uint64_t>& words, std::string_view collective);

// Ok when the nodes' inputs' linear sums (input_sums[n] is node n's) add up to
// the result's (linear_sum.h); otherwise a Mismatch that says the nodes agree
// on a result that is not the sum of their inputs. It cannot say which node
// reduced wrongly: every node is to be checked.
Status compare_linear(const std::vector<std::uint64_t>& input_sums, std::uint64_t result_sum, DType dtype,
                      std::string_view collective);

}  // namespace ringsync::service::integrity
