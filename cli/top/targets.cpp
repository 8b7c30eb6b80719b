#include "cli/top/targets.h"

#include <fstream>
#include <system_error>

#include "cli/node_daemons.h"
#include "common/text.h"
#include "common/units.h"

namespace ringsync::cli::top {
namespace {

namespace fs = std::filesystem;

Result<Target> parse_target(std::string_view text) {
  const std::string given(text);
  Target target;
  std::string_view rest = text::trim(text);
  if (rest.starts_with("https://"))
    return Status::InvalidArgument("'" + given + "': the daemons serve plain http://");
  if (rest.starts_with("http://")) rest.remove_prefix(7);
  if (const auto slash = rest.find('/'); slash != std::string_view::npos) {
    target.path = std::string(rest.substr(slash));
    rest = rest.substr(0, slash);
  }
  auto address = units::parse_address(rest);
  if (!address.ok() || !*address)
    return Status::InvalidArgument("'" + given + "' is not HOST:PORT or http://HOST:PORT[/path]" +
                                   (address.ok() ? "" : ": " + address.status().message()));
  if ((*address)->port == 0) return Status::InvalidArgument("'" + given + "': port 0 is no daemon's port");
  target.host = (*address)->host;
  target.port = (*address)->port;
  return target;
}

}  // namespace

std::string Target::instance() const { return units::Address{host, port}.to_string(); }

Result<std::vector<Target>> parse_targets(const std::string& list) {
  std::vector<Target> targets;
  std::size_t start = 0;
  while (start <= list.size()) {
    const std::size_t comma = std::min(list.find(',', start), list.size());
    const std::string_view item = text::trim(std::string_view(list).substr(start, comma - start));
    start = comma + 1;
    if (item.empty()) continue;
    auto target = parse_target(item);
    if (!target.ok()) return target.status();
    targets.push_back(std::move(*target));
  }
  if (targets.empty()) return Status::InvalidArgument("no address in '" + list + "'");
  return targets;
}

Result<std::vector<Target>> launch_targets(const fs::path& dir) {
  const fs::path file = dir / kMetricsAddressesFile;
  std::ifstream in(file);
  if (!in) {
    std::error_code ec;
    return Status::InvalidArgument(
        "cannot read " + file.string() +
        (fs::is_directory(dir, ec) ? " (is DIR a ringsync launch's --log-dir or run directory, and does it run?)"
                                   : " (no such directory)"));
  }
  std::vector<Target> targets;
  int line_number = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    const std::string_view item = text::trim(line);
    if (item.empty() || item.front() == '#') continue;
    auto target = parse_target(item);
    if (!target.ok())
      return Status::InvalidArgument(file.string() + " line " + std::to_string(line_number) + ": " +
                                     target.status().message());
    targets.push_back(std::move(*target));
  }
  if (targets.empty())
    return Status::InvalidArgument(file.string() + " lists no daemon (did the launch start its daemons with "
                                   "--metrics-address off?)");
  return targets;
}

Result<fs::path> newest_launch_dir() {
  std::error_code ec;
  const fs::path temp = fs::temp_directory_path(ec);
  if (ec) return Status::InvalidArgument("no temporary directory to look for ringsync launch runs in");
  fs::path newest;
  fs::file_time_type newest_time{};
  for (fs::directory_iterator it(temp, fs::directory_options::skip_permission_denied, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (!it->path().filename().string().starts_with("ringsync-launch-")) continue;
    std::error_code file_ec;
    const auto time = fs::last_write_time(it->path() / kMetricsAddressesFile, file_ec);
    if (file_ec) continue;  // someone else's, or one whose daemons are not up yet
    if (newest.empty() || time > newest_time) {
      newest = it->path();
      newest_time = time;
    }
  }
  if (newest.empty())
    return Status::InvalidArgument("no daemons to watch: give --metrics HOST:PORT[,HOST:PORT...] or --launch-dir DIR "
                                   "(no ringsync launch of yours runs here: none of " +
                                   (temp / "ringsync-launch-*").string() + " has a " + kMetricsAddressesFile + ")");
  return newest;
}

}  // namespace ringsync::cli::top
