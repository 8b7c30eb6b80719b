#include <doctest/doctest.h>

#include <sys/socket.h>
#include <unistd.h>

#include "service/local/client_access.h"

namespace test_service_local_client_access {

using namespace ringsync;
using namespace ringsync::service;

TEST_CASE("auth policy: the daemon's uid only by default; --allow-uid and --allow-gid by number or name") {
  auto plain = local::AccessPolicy::parse(1000, "", "");
  REQUIRE(plain.ok());
  CHECK(plain->admit({1000, 1000, 1, {}}).ok());
  const Status refused = plain->admit({1001, 1001, 1, {}});
  CHECK(refused.code() == StatusCode::kInvalidArgument);
  CHECK(refused.message().find("does not serve uid 1001") != std::string::npos);
  CHECK(refused.message().find("--allow-uid 1001") != std::string::npos);
  CHECK(plain->socket_mode() == 0600);
  CHECK_FALSE(plain->socket_group());
  CHECK_FALSE(plain->shared());

  auto named = local::AccessPolicy::parse(1000, "root,1002", "nogroup");  // names every Debian has
  REQUIRE(named.ok());
  CHECK(named->uids == std::vector<uid_t>{0, 1002});
  CHECK(named->gids == std::vector<gid_t>{65534});
  CHECK(named->admit({0, 0, 1, {}}).ok());
  CHECK(named->admit({1002, 5, 1, {}}).ok());
  CHECK(named->admit({3000, 65534, 1, {}}).ok());        // primary group
  CHECK(named->admit({3000, 5, 1, {7, 65534}}).ok());     // a supplementary group
  CHECK_FALSE(named->admit({3000, 5, 1, {7}}).ok());
  CHECK(named->socket_mode() == 0666);

  auto group = local::AccessPolicy::parse(1000, "", "12345");
  REQUIRE(group.ok());
  CHECK(group->socket_mode() == 0660);
  CHECK(group->socket_group() == gid_t{12345});

  auto bad = local::AccessPolicy::parse(1000, "no-such-user-here", "");
  CHECK(bad.status().message().find("no user named 'no-such-user-here'") != std::string::npos);
  auto bad_group = local::AccessPolicy::parse(1000, "", "7,no-such-group-here");
  CHECK(bad_group.status().message().find("no group named 'no-such-group-here'") != std::string::npos);
}

TEST_CASE("auth credentials: the kernel's word for the other end of a Unix socket") {
  int fds[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
  const local::Credentials who = local::peer_credentials(fds[0]);
  CHECK(who.uid == ::getuid());
  CHECK(who.gid == ::getgid());
  CHECK(who.pid == ::getpid());
  ::close(fds[0]);
  ::close(fds[1]);
  const local::Credentials nobody = local::peer_credentials(-1);  // not a socket: matches no one
  auto policy = local::AccessPolicy::parse(::getuid(), "", "");
  REQUIRE(policy.ok());
  CHECK_FALSE(policy->admit(nobody).ok());
}

}  // namespace test_service_local_client_access
