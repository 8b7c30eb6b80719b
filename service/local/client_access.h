// Who may use the daemon's Unix socket. The kernel says who connected
// (SO_PEERCRED: uid, gid, pid; the supplementary groups come from
// /proc/<pid>/status where the pid is visible); the daemon serves its own uid,
// and the uids and gids of --allow-uid and --allow-gid (sidecars running as
// another user, multi-tenant nodes). The socket file's mode follows: 0600 by
// default, 0660 with the group of a single --allow-gid, 0666 when uids are
// allowed (the credentials check is then what keeps others out).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace ringsync::service::local {

struct Credentials {
  uid_t uid = 0;
  gid_t gid = 0;
  pid_t pid = 0;                // 0: not visible from the daemon's pid namespace
  std::vector<gid_t> groups;    // supplementary, where /proc tells
};

// The credentials of the process at the other end of a connected Unix socket.
Credentials peer_credentials(int fd);

struct AccessPolicy {
  uid_t daemon_uid = 0;
  std::vector<uid_t> uids;  // --allow-uid
  std::vector<gid_t> gids;  // --allow-gid

  // Parses comma-separated lists of numbers or user/group names ("" for none).
  static Result<AccessPolicy> parse(uid_t daemon_uid, std::string_view uids, std::string_view gids);

  // Ok, or kInvalidArgument saying who was refused and how to allow them.
  Status admit(const Credentials& who) const;

  // The socket file's mode, and the group to give it (none: keep the daemon's).
  mode_t socket_mode() const;
  std::optional<gid_t> socket_group() const;
  // Whether others than the daemon's uid may connect (the folder must let them through).
  bool shared() const { return !uids.empty() || !gids.empty(); }
};

}  // namespace ringsync::service::local
