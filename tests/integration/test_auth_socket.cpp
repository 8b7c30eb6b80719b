// Who may use a daemon's Unix socket (service/local/client_access.h): trainers of
// other users run under setpriv, so these tests need root (CI runs as root).
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "cluster_fixture.h"
#include "daemon_fixture.h"

namespace test_integration_auth_socket {

using namespace ringsync::test;
using namespace std::chrono_literals;

namespace {

constexpr const char* kNobody = "65534";

// Where another uid runs ringsync-test-rank from: the build may sit in a
// folder only its owner can enter (a clone in root's home, mode 0700), so the
// rank and libringsync go to a folder every user can read, once per run.
const std::string& rank_folder_for_others() {
  static const TempDir folder;  // removed at exit
  static const std::string path = [] {
    namespace fs = std::filesystem;
    fs::permissions(folder.path(), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                       fs::perms::others_read | fs::perms::others_exec);
    fs::copy_file(bin("ringsync-test-rank"), folder.file("ringsync-test-rank"));
    for (const auto& entry : fs::directory_iterator(fs::path(bin("")).parent_path().parent_path() / "lib"))
      if (entry.path().filename().string().rfind("libringsync.so", 0) == 0)
        fs::copy(entry.path(), fs::path(folder.path()) / entry.path().filename(), fs::copy_options::copy_symlinks);
    return folder.path();
  }();
  return path;
}

// A ringsync-test-rank started as `uid`:`gid` (no supplementary groups).
Child rank_as(const std::string& uid, const std::string& gid, const DaemonFixture& daemon, int rank, int size,
              const std::string& job, const std::vector<std::string>& scenario, const std::string& log) {
  const std::string& folder = rank_folder_for_others();
  std::vector<std::string> argv = {"/usr/bin/setpriv", "--reuid=" + uid, "--regid=" + gid, "--clear-groups",
                                   folder + "/ringsync-test-rank"};
  argv.insert(argv.end(), scenario.begin(), scenario.end());
  auto env = daemon.rank_env(rank, size, job);
  env["LD_LIBRARY_PATH"] = folder;
  return spawn(argv, env, daemon.dir().file(log));
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

}  // namespace test_integration_auth_socket
