#include "common/cpu_list.h"

#include <algorithm>
#include <charconv>

namespace ringsync {

namespace {

// A CPU number: digits only, at most kMaxCpu.
bool parse_cpu(std::string_view text, int& cpu) {
  if (text.empty() || text.size() > 4) return false;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), cpu);
  return ec == std::errc() && end == text.data() + text.size() && cpu >= 0 && cpu <= kMaxCpu;
}

// 'text' (built by appending: g++ 12 warns falsely on "'" + std::string).
std::string quoted(std::string_view text) {
  std::string out(1, '\'');
  out.append(text);
  out += '\'';
  return out;
}

}  // namespace

Result<std::vector<int>> parse_cpu_list(std::string_view text) {
  if (text.empty()) return Status::InvalidArgument("an empty CPU list");
  std::vector<int> cpus;
  while (true) {
    const std::size_t comma = text.find(',');
    const std::string_view entry = text.substr(0, comma);
    const std::size_t dash = entry.find('-');
    int lo = 0;
    int hi = 0;
    const bool ok = dash == std::string_view::npos
                        ? parse_cpu(entry, lo) && parse_cpu(entry, hi)
                        : parse_cpu(entry.substr(0, dash), lo) && parse_cpu(entry.substr(dash + 1), hi);
    if (!ok)
      return Status::InvalidArgument(quoted(entry) + " is not a CPU number (0 to " + std::to_string(kMaxCpu) +
                                     ") or a range of them such as 2-5");
    if (hi < lo) return Status::InvalidArgument("the CPU range " + quoted(entry) + " runs backwards");
    for (int c = lo; c <= hi; ++c) cpus.push_back(c);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace ringsync
