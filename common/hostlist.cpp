#include "common/hostlist.h"

#include <algorithm>
#include <charconv>

namespace ringsync {

namespace {

Status malformed(std::string_view list, const std::string& why) {
  return Status::InvalidArgument("host list '" + std::string(list) + "': " + why);
}

// The names one bracket group stands for: "01-03,07" -> 01 02 03 07.
Result<std::vector<std::string>> expand_group(std::string_view list, std::string_view group) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at <= group.size()) {
    const std::size_t comma = std::min(group.find(',', at), group.size());
    const std::string_view item = group.substr(at, comma - at);
    at = comma + 1;
    const std::size_t dash = item.find('-');
    const std::string_view first = item.substr(0, dash);
    const std::string_view last = dash == std::string_view::npos ? first : item.substr(dash + 1);
    unsigned long lo = 0, hi = 0;
    const auto parse = [](std::string_view digits, unsigned long& value) {
      if (digits.empty() || digits.size() > 9) return false;
      auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
      return ec == std::errc() && end == digits.data() + digits.size();
    };
    if (!parse(first, lo) || !parse(last, hi))
      return malformed(list, "'[" + std::string(group) + "]' has '" + std::string(item) +
                                 "', which is not a number or a range of numbers");
    if (hi < lo) return malformed(list, "the range '" + std::string(item) + "' runs backwards");
    if (hi - lo >= 65536) return malformed(list, "the range '" + std::string(item) + "' is too large");
    const std::size_t width = first.size();  // "01-10": 01 02 ... 10
    for (unsigned long v = lo; v <= hi; ++v) {
      std::string digits = std::to_string(v);
      if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
      out.push_back(std::move(digits));
    }
  }
  return out;
}

// Appends the names of one comma-separated entry of the list ("n[1-2]-ib").
Status expand_entry(std::string_view list, std::string_view entry, std::size_t max_hosts,
                    std::vector<std::string>& hosts) {
  if (entry.empty()) return malformed(list, "it has an empty name (two commas in a row, or one at an end)");
  std::vector<std::string> names = {""};
  std::size_t at = 0;
  while (at < entry.size()) {
    const std::size_t open = entry.find('[', at);
    const std::string_view text = entry.substr(at, open == std::string_view::npos ? entry.npos : open - at);
    if (text.find(']') != std::string_view::npos) return malformed(list, "a ']' has no '['");
    for (auto& n : names) n += text;
    if (open == std::string_view::npos) break;
    const std::size_t close = entry.find(']', open);
    if (close == std::string_view::npos) return malformed(list, "a '[' is not closed");
    auto group = expand_group(list, entry.substr(open + 1, close - open - 1));
    if (!group.ok()) return group.status();
    if (names.size() * group->size() + hosts.size() > max_hosts)
      return malformed(list, "it names more than " + std::to_string(max_hosts) + " hosts");
    std::vector<std::string> product;
    product.reserve(names.size() * group->size());
    for (const auto& n : names)
      for (const auto& g : *group) product.push_back(n + g);
    names = std::move(product);
    at = close + 1;
  }
  if (hosts.size() + names.size() > max_hosts)
    return malformed(list, "it names more than " + std::to_string(max_hosts) + " hosts");
  hosts.insert(hosts.end(), names.begin(), names.end());
  return Status::Ok();
}

}  // namespace

Result<std::vector<std::string>> expand_hostlist(std::string_view list, std::size_t max_hosts) {
  std::vector<std::string> hosts;
  if (list.empty()) return malformed(list, "it is empty");
  std::size_t start = 0;
  int depth = 0;
  for (std::size_t i = 0; i <= list.size(); ++i) {
    const char c = i < list.size() ? list[i] : ',';
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0) return malformed(list, "a ']' has no '['");
    if (depth > 1) return malformed(list, "brackets are nested");
    if (c == ',' && depth == 0) {
      RINGSYNC_RETURN_IF_ERROR(expand_entry(list, list.substr(start, i - start), max_hosts, hosts));
      start = i + 1;
    }
  }
  if (depth != 0) return malformed(list, "a '[' is not closed");
  return hosts;
}

}  // namespace ringsync
