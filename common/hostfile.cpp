#include "common/hostfile.h"

#include <charconv>
#include <fstream>
#include <sstream>

#include "common/text.h"

namespace ringsync {
namespace {

Result<std::uint32_t> parse_number(std::string_view text, std::uint32_t max, const std::string& what) {
  std::uint32_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value > max)
    return Status::InvalidArgument(what + ": '" + std::string(text) + "' is not a number in [0, " +
                                   std::to_string(max) + "]");
  return value;
}

// "host", "host:port", "[v6]:port".
Status split_host_port(std::string_view text, HostEntry& out, const std::string& where) {
  std::string_view host = text;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos)
      return Status::InvalidArgument(where + ": unterminated '[' in '" + std::string(text) + "'");
    host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':')
        return Status::InvalidArgument(where + ": expected ':' after ']' in '" + std::string(text) + "'");
      port = text.substr(close + 2);
    }
  } else if (const auto colon = text.rfind(':'); colon != std::string_view::npos) {
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (host.empty()) return Status::InvalidArgument(where + ": empty host name");
  out.host = std::string(host);
  if (!port.empty()) {
    auto p = parse_number(port, 65535, where + ": port");
    if (!p.ok()) return p.status();
    out.port = static_cast<std::uint16_t>(*p);
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<HostEntry>> parse_hostfile(std::string_view text, std::string_view origin) {
  std::vector<HostEntry> hosts;
  std::istringstream lines{std::string(text)};
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    const std::string where = std::string(origin) + ":" + std::to_string(number);
    std::string_view rest = line;
    if (const auto hash = rest.find('#'); hash != std::string_view::npos) rest = rest.substr(0, hash);
    rest = text::trim(rest);
    if (rest.empty()) continue;
    const auto space = rest.find_first_of(" \t");
    HostEntry entry;
    RINGSYNC_RETURN_IF_ERROR(split_host_port(rest.substr(0, space), entry, where));
    if (space != std::string_view::npos) {
      std::string_view option = text::trim(rest.substr(space));
      if (option.rfind("slots=", 0) != 0 || option.find_first_of(" \t") != std::string_view::npos)
        return Status::InvalidArgument(where + ": expected 'host[:port] slots=N', got '" +
                                       std::string(rest) + "'");
      auto slots = parse_number(option.substr(6), 4096, where + ": slots");
      if (!slots.ok()) return slots.status();
      if (*slots == 0) return Status::InvalidArgument(where + ": slots must be at least 1");
      entry.slots = *slots;
    }
    hosts.push_back(std::move(entry));
  }
  if (hosts.empty())
    return Status::InvalidArgument(std::string(origin) + ": no hosts (one 'host[:port] slots=N' per line)");
  return hosts;
}

Result<std::vector<HostEntry>> read_hostfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::InvalidArgument("cannot read hostfile " + path);
  std::stringstream text;
  text << in.rdbuf();
  return parse_hostfile(text.str(), path);
}

Result<std::vector<HostEntry>> parse_host_list(std::string_view list) {
  std::vector<HostEntry> hosts;
  std::size_t start = 0;
  while (start <= list.size()) {
    const auto comma = list.find(',', start);
    std::string_view item = text::trim(list.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    const std::string where = "host list item '" + std::string(item) + "'";
    // "host:slots" (horovodrun -H); a port is not part of this form.
    HostEntry entry;
    const auto colon = item.rfind(':');
    if (item.empty()) return Status::InvalidArgument("empty item in host list '" + std::string(list) + "'");
    entry.host = std::string(item.substr(0, colon));
    if (entry.host.empty()) return Status::InvalidArgument(where + ": empty host name");
    if (colon != std::string_view::npos) {
      auto slots = parse_number(item.substr(colon + 1), 4096, where);
      if (!slots.ok()) return slots.status();
      if (*slots == 0) return Status::InvalidArgument(where + ": slots must be at least 1");
      entry.slots = *slots;
    }
    hosts.push_back(std::move(entry));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return hosts;
}

Result<std::vector<HostEntry>> parse_node_list(std::string_view list, std::uint32_t slots) {
  std::vector<HostEntry> nodes;
  std::size_t start = 0;
  while (start <= list.size()) {
    const auto comma = list.find(',', start);
    std::string_view item =
        text::trim(list.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (item.empty()) return Status::InvalidArgument("empty item in node list '" + std::string(list) + "'");
    HostEntry entry;
    entry.slots = slots;
    RINGSYNC_RETURN_IF_ERROR(split_host_port(item, entry, "node list item '" + std::string(item) + "'"));
    if (entry.host.empty())
      return Status::InvalidArgument("node list item '" + std::string(item) + "': empty host name");
    nodes.push_back(std::move(entry));
    if (nodes.size() > 65536) return Status::InvalidArgument("node list has more than 65536 nodes");
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return nodes;
}

}  // namespace ringsync
