#include "service/integrity/verdict.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>

#include "service/integrity/linear_sum.h"

namespace ringsync::service::integrity {

namespace {

std::string hex(std::uint32_t digest) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", digest);
  return text;
}

std::string node_list(const std::vector<std::size_t>& nodes) {
  std::string text = nodes.size() == 1 ? "node " : "nodes ";
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (i > 0) text += ',';
    text += std::to_string(nodes[i]);
  }
  return text;
}

VerifyResults mode_of(std::uint64_t word) { return static_cast<VerifyResults>(word >> 32); }

}  // namespace

std::uint64_t check_word(VerifyResults mode, std::uint32_t digest) {
  return (static_cast<std::uint64_t>(mode) << 32) | digest;
}

Status compare_results(const std::vector<std::uint64_t>& words, std::string_view collective) {
  std::map<std::uint64_t, std::vector<std::size_t>> holders;  // word -> nodes, ascending
  for (std::size_t n = 0; n < words.size(); ++n) holders[words[n]].push_back(n);
  if (holders.size() <= 1) return Status::Ok();

  std::map<VerifyResults, std::vector<std::size_t>> modes;
  for (std::size_t n = 0; n < words.size(); ++n) modes[mode_of(words[n])].push_back(n);
  if (modes.size() > 1) {
    std::string which;
    for (const auto& [mode, nodes] : modes)
      which += (which.empty() ? "" : ", ") + node_list(nodes) + " " + std::string(verify_results_name(mode));
    return Status::Mismatch("result check of " + std::string(collective) +
                            " cannot compare: the nodes run with different --verify-results (" + which +
                            "); give every node of the job the same setting");
  }

  std::size_t largest = 0, groups_of_largest = 0;
  for (const auto& [word, nodes] : holders) {
    if (nodes.size() > largest) largest = nodes.size(), groups_of_largest = 0;
    if (nodes.size() == largest) ++groups_of_largest;
  }
  const bool majority = groups_of_largest == 1;
  // The minority first (smallest groups), the majority last.
  std::vector<std::pair<std::uint64_t, std::vector<std::size_t>>> groups(holders.begin(), holders.end());
  std::stable_sort(groups.begin(), groups.end(),
                   [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
  std::string held;
  std::vector<std::size_t> suspects;
  for (const auto& [word, nodes] : groups) {
    held += (held.empty() ? "" : ", ") + node_list(nodes) + (nodes.size() == 1 ? " holds " : " hold ") +
            hex(static_cast<std::uint32_t>(word));
    if (!majority || nodes.size() < largest) suspects.insert(suspects.end(), nodes.begin(), nodes.end());
  }
  std::sort(suspects.begin(), suspects.end());
  const std::string named = node_list(suspects);
  const std::string cause =
      majority ? named + (suspects.size() == 1 ? " holds a copy" : " hold copies") +
                     " of the result that differs from the other nodes'"
               : "no copy of the result is held by a majority, so the check cannot tell which is wrong";
  return Status::Mismatch("result check failed for " + std::string(collective) + ": " + held + "; " + cause +
                          ": a node's memory or the network corrupted data (silent data corruption). The "
                          "collective failed on every rank; check the memory (ECC error counters, a memory "
                          "test) and the network interface and link error counters of " + named +
                          ", then retry");
}

Status compare_linear(const std::vector<std::uint64_t>& input_sums, std::uint64_t result_sum, DType dtype,
                      std::string_view collective) {
  std::uint64_t inputs = 0;
  for (std::uint64_t s : input_sums) inputs = linear_add(inputs, s, dtype);
  if (inputs == result_sum) return Status::Ok();
  std::vector<std::size_t> every(input_sums.size());
  for (std::size_t n = 0; n < every.size(); ++n) every[n] = n;
  char sums[64];
  std::snprintf(sums, sizeof sums, "0x%016llx, the inputs' add up to 0x%016llx",
                static_cast<unsigned long long>(result_sum), static_cast<unsigned long long>(inputs));
  return Status::Mismatch("result check failed for " + std::string(collective) +
                          ": every node holds the same result, but it is not the sum of the nodes' inputs (its "
                          "linear checksum is " + sums + "): a node reduced part of it wrongly, or corrupted it "
                          "before sending it on (silent data corruption in a CPU or memory). The collective "
                          "failed on every rank; the check cannot tell which node: check the memory (ECC error "
                          "counters, a memory test) and the CPUs of " + node_list(every) + ", then retry");
}

}  // namespace ringsync::service::integrity
