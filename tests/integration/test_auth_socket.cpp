// Who may use a daemon's Unix socket (service/local/client_access.h): trainers of
// other users run under setpriv, so these tests need root (CI runs as root).
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "cluster_fixture.h"
#include "daemon_fixture.h"

using namespace ringsync::test;
using namespace std::chrono_literals;

namespace {

constexpr const char* kNobody = "65534";

// A ringsync-test-rank started as `uid`:`gid` (no supplementary groups).
Child rank_as(const std::string& uid, const std::string& gid, const DaemonFixture& daemon, int rank, int size,
              const std::string& job, const std::vector<std::string>& scenario, const std::string& log) {
  std::vector<std::string> argv = {"/usr/bin/setpriv", "--reuid=" + uid, "--regid=" + gid, "--clear-groups",
                                   bin("ringsync-test-rank")};
  argv.insert(argv.end(), scenario.begin(), scenario.end());
  return spawn(argv, daemon.rank_env(rank, size, job), daemon.dir().file(log));
}

// Others may reach the socket only through the test's own folder.
void open_folder(const DaemonFixture& daemon) { ::chmod(daemon.dir().path().c_str(), 0711); }

bool can_switch_users() { return ::geteuid() == 0 && ::access("/usr/bin/setpriv", X_OK) == 0; }

}  // namespace

TEST_CASE("auth: a trainer of a uid the daemon does not serve is refused, with what to do" *
          doctest::skip(!can_switch_users())) {
  // --allow-uid of someone else opens the socket file (0666): the daemon's own
  // credentials check is what refuses uid 65534.
  DaemonFixture daemon({"--allow-uid", "65533"});
  open_folder(daemon);
  struct stat st {};
  REQUIRE(::stat(daemon.socket().c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0666);
  Child refused = rank_as(kNobody, kNobody, daemon, 0, 1, "stranger", {"collectives", "4"}, "refused.log");
  const auto code = refused.wait(60s);
  REQUIRE(code.has_value());
  CHECK(WIFEXITED(*code));
  CHECK(WEXITSTATUS(*code) == rank_exit::kConnectFailed);
  const std::string said = read_file(daemon.dir().file("refused.log"));
  CHECK_MESSAGE(said.find("does not serve uid 65534") != std::string::npos, said);
  CHECK_MESSAGE(said.find("--allow-uid 65534") != std::string::npos, said);
  CHECK(daemon.log().find("does not serve uid 65534") != std::string::npos);
  CHECK(daemon.running());
  CHECK(daemon.stop());
}

TEST_CASE("auth: an allowed gid works; its socket is 0660 in that group" * doctest::skip(!can_switch_users())) {
  DaemonFixture daemon({"--allow-gid", "12345"});
  open_folder(daemon);
  struct stat st {};
  REQUIRE(::stat(daemon.socket().c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0660);
  CHECK(st.st_gid == 12345u);
  std::vector<Child> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.push_back(rank_as(kNobody, "12345", daemon, r, 2, "grouped", {"collectives", "1", "1001"},
                            "grouped" + std::to_string(r) + ".log"));
  for (int r = 0; r < 2; ++r)
    CHECK_MESSAGE(ranks[r].succeeded(120s), read_file(daemon.dir().file("grouped" + std::to_string(r) + ".log")));
  CHECK(daemon.stop());
}

TEST_CASE("auth: a job belongs to the uid that made it; another uid cannot attach to it" *
          doctest::skip(!can_switch_users())) {
  DaemonFixture daemon({"--allow-uid", kNobody});
  open_folder(daemon);
  // Rank 0 of job 'owned' as root (the daemon's uid) makes the job and waits
  // in its first collective; rank 1 as uid 65534 tries to join it.
  Child owner = spawn({bin("ringsync-test-rank"), "submit-wait", "owned.t", "10"}, daemon.rank_env(0, 2, "owned"),
                      daemon.dir().file("owner.log"));
  // The intruder starts once the owner has joined (bounded: a hang fails here).
  bool joined = false;
  for (int i = 0; i < 600 && !joined; ++i) {
    joined = daemon.log().find("joined job 'owned'") != std::string::npos;
    if (!joined) std::this_thread::sleep_for(50ms);
  }
  REQUIRE_MESSAGE(joined, daemon.log());
  Child intruder = rank_as(kNobody, kNobody, daemon, 1, 2, "owned", {"collectives", "4"}, "intruder.log");
  const auto code = intruder.wait(60s);
  REQUIRE(code.has_value());
  CHECK(WIFEXITED(*code));
  CHECK(WEXITSTATUS(*code) == rank_exit::kConnectFailed);
  const std::string said = read_file(daemon.dir().file("intruder.log"));
  CHECK_MESSAGE(said.find("job 'owned' on this ringsyncd belongs to uid 0, not to uid 65534") != std::string::npos,
                said);
  // Its own job works for the allowed uid.
  Child own = rank_as(kNobody, kNobody, daemon, 0, 1, "theirs", {"collectives", "4"}, "theirs.log");
  CHECK_MESSAGE(own.succeeded(60s), read_file(daemon.dir().file("theirs.log")));
  owner.signal(SIGKILL);
  CHECK(daemon.running());
  CHECK(daemon.stop());
}
