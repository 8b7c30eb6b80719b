#include "service/local/client_access.h"

#include <grp.h>
#include <pwd.h>
#include <sys/socket.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

namespace ringsync::service::local {
namespace {

std::vector<gid_t> supplementary_groups(pid_t pid) {
  std::vector<gid_t> groups;
  if (pid <= 0) return groups;
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("Groups:", 0) != 0) continue;
    std::istringstream in(line.substr(7));
    for (long g; in >> g;) groups.push_back(static_cast<gid_t>(g));
  }
  return groups;
}

// A number, or a name looked up with `find`; the error names `what`.
template <typename Id, typename Find>
Result<std::vector<Id>> parse_ids(std::string_view list, const char* what, Find find) {
  std::vector<Id> ids;
  for (std::size_t start = 0; start < list.size();) {
    std::size_t comma = list.find(',', start);
    if (comma == std::string_view::npos) comma = list.size();
    const std::string item(list.substr(start, comma - start));
    start = comma + 1;
    if (item.empty()) continue;
    unsigned long number = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), number);
    if (ec == std::errc() && end == item.data() + item.size()) {
      ids.push_back(static_cast<Id>(number));
    } else if (auto found = find(item)) {
      ids.push_back(*found);
    } else {
      const bool user = std::string_view(what) == "uid";
      return Status::InvalidArgument(std::string("allow-") + what + ": no " + (user ? "user" : "group") +
                                     " named '" + item + "' on this machine; give one that exists, or a number");
    }
  }
  return ids;
}

}  // namespace

Credentials peer_credentials(int fd) {
  Credentials who;
  ucred credentials{};
  socklen_t length = sizeof(credentials);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0) {
    who.uid = credentials.uid;
    who.gid = credentials.gid;
    who.pid = credentials.pid;
    who.groups = supplementary_groups(credentials.pid);
  } else {
    who.uid = static_cast<uid_t>(-1);  // unknown: matches nothing
    who.gid = static_cast<gid_t>(-1);
  }
  return who;
}

Result<AccessPolicy> AccessPolicy::parse(uid_t daemon_uid, std::string_view uids, std::string_view gids) {
  AccessPolicy policy;
  policy.daemon_uid = daemon_uid;
  auto users = parse_ids<uid_t>(uids, "uid", [](const std::string& name) -> std::optional<uid_t> {
    if (const passwd* p = ::getpwnam(name.c_str())) return p->pw_uid;
    return std::nullopt;
  });
  if (!users.ok()) return users.status();
  auto groups = parse_ids<gid_t>(gids, "gid", [](const std::string& name) -> std::optional<gid_t> {
    if (const group* g = ::getgrnam(name.c_str())) return g->gr_gid;
    return std::nullopt;
  });
  if (!groups.ok()) return groups.status();
  policy.uids = std::move(users).value();
  policy.gids = std::move(groups).value();
  return policy;
}

Status AccessPolicy::admit(const Credentials& who) const {
  if (who.uid == daemon_uid) return Status::Ok();
  if (std::find(uids.begin(), uids.end(), who.uid) != uids.end()) return Status::Ok();
  for (gid_t g : gids)
    if (who.gid == g || std::find(who.groups.begin(), who.groups.end(), g) != who.groups.end())
      return Status::Ok();
  return Status::InvalidArgument(
      "ringsyncd (running as uid " + std::to_string(daemon_uid) + ") does not serve uid " +
      std::to_string(who.uid) + " (gid " + std::to_string(who.gid) +
      "); run the trainer as the daemon's user, or start ringsyncd with --allow-uid " + std::to_string(who.uid) +
      " or --allow-gid GROUP for a group the trainer is in");
}

mode_t AccessPolicy::socket_mode() const {
  if (!uids.empty() || gids.size() > 1) return 0666;
  if (gids.size() == 1) return 0660;
  return 0600;
}

std::optional<gid_t> AccessPolicy::socket_group() const {
  if (uids.empty() && gids.size() == 1) return gids.front();
  return std::nullopt;
}

}  // namespace ringsync::service::local
