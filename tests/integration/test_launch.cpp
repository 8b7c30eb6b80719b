// `ringsync launch`: daemons as simulated nodes, trainer ranks with their
// environment, prefixed output, and how a job ends (first failure, a lost daemon,
// a timeout, a signal). The trainers are shell one-liners, so these tests are
// about the launcher, not about collectives.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>

#include <cerrno>
#include <filesystem>
#include <set>
#include <sstream>
#include <thread>

#include "daemon_fixture.h"

namespace test_integration_launch {

using namespace ringsync::test;
using namespace std::chrono_literals;

namespace {

struct Outcome {
  int status = -1;  // exit status, or 128+signal
  std::string out;  // the launcher's stdout
  std::string err;  // the launcher's stderr
};

// `ringsync launch ARGS...` with stdout and stderr in separate files, started
// through sh so the files are written by the launcher itself (exec: the pid is
// the launcher's).
class Launcher {
 public:
  Launcher(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {}) {
    std::vector<std::string> argv = {"/bin/sh", "-c", "out=$1; err=$2; shift 2; exec \"$@\" >\"$out\" 2>\"$err\"",
                                     "sh", dir_.file("out"), dir_.file("err"), bin("ringsync"), "launch"};
    argv.insert(argv.end(), args.begin(), args.end());
    child_ = spawn(argv, env);
  }

  Child& child() { return child_; }

  // Waits (bounded: a launcher that hangs fails the test instead of the suite).
  Outcome finish() {
    Outcome o;
    const auto st = child_.wait(180s);
    o.out = read_file(dir_.file("out"));
    o.err = read_file(dir_.file("err"));
    REQUIRE_MESSAGE(st.has_value(), "the launcher did not finish; stderr so far:\n" << o.err);
    o.status = WIFEXITED(*st) ? WEXITSTATUS(*st) : 128 + WTERMSIG(*st);
    return o;
  }

 private:
  TempDir dir_;
  Child child_;
};

Outcome launch(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {}) {
  return Launcher(args, env).finish();
}

bool wait_for_files(const std::vector<std::string>& paths, std::chrono::seconds timeout = 60s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (const auto& p : paths)
    while (!std::filesystem::exists(p)) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(10ms);
    }
  return true;
}

// The pid a rank wrote (its sh, which then exec'd), or -1.
pid_t pid_in(const std::string& path) {
  const std::string text = read_file(path);
  return text.empty() ? -1 : static_cast<pid_t>(std::stol(text));
}

bool gone(pid_t pid) { return pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH; }

// A shell line for each rank: write its pid to $T/pid.RANK, then become `then`.
std::string record_pid_then(const std::string& then) {
  return "echo $$ > \"$T/pid.$RINGSYNC_RANK.tmp\" && mv \"$T/pid.$RINGSYNC_RANK.tmp\" \"$T/pid.$RINGSYNC_RANK\"; " +
         then;
}

}  // namespace

TEST_CASE("launch starts nodes x slots ranks, tells each its place, and prefixes every line") {
  const auto o = launch({"--nodes", "2", "--slots", "2", "--job-id", "envtest", "--", "sh", "-c",
                         "echo \"r=$RINGSYNC_RANK s=$RINGSYNC_SIZE lr=$RINGSYNC_LOCAL_RANK "
                         "ls=$RINGSYNC_LOCAL_SIZE n=$RINGSYNC_NODE_RANK nn=$RINGSYNC_NUM_NODES "
                         "j=$RINGSYNC_JOB_ID sock=$(basename \"$RINGSYNC_SOCKET\")\"; "
                         "echo \"to stderr from $RINGSYNC_RANK\" >&2"});
  CHECK_MESSAGE(o.status == 0, o.err);
  for (const char* line : {"[rank 0] r=0 s=4 lr=0 ls=2 n=0 nn=2 j=envtest sock=node-0.sock\n",
                           "[rank 1] r=1 s=4 lr=1 ls=2 n=0 nn=2 j=envtest sock=node-0.sock\n",
                           "[rank 2] r=2 s=4 lr=0 ls=2 n=1 nn=2 j=envtest sock=node-1.sock\n",
                           "[rank 3] r=3 s=4 lr=1 ls=2 n=1 nn=2 j=envtest sock=node-1.sock\n"})
    CHECK_MESSAGE(o.out.find(line) != std::string::npos, line, "\n", o.out);
  for (int r = 0; r < 4; ++r) {
    const std::string line = "[rank " + std::to_string(r) + "] to stderr from " + std::to_string(r) + "\n";
    CHECK_MESSAGE(o.err.find(line) != std::string::npos, line, "\n", o.err);
  }
  // torch.distributed's names for the same places (as torchrun sets them), and
  // one env:// rendezvous address for the whole job.
  const auto torch = launch({"--nodes", "2", "--slots", "2", "--", "sh", "-c",
                             "echo \"t=$RANK/$WORLD_SIZE l=$LOCAL_RANK/$LOCAL_WORLD_SIZE m=$MASTER_ADDR:$MASTER_PORT\""});
  CHECK_MESSAGE(torch.status == 0, torch.err);
  std::set<std::string> masters;
  for (int r = 0; r < 4; ++r) {
    const std::string head = "[rank " + std::to_string(r) + "] t=" + std::to_string(r) + "/4 l=" +
                             std::to_string(r % 2) + "/2 m=127.0.0.1:";
    const auto at = torch.out.find(head);
    REQUIRE_MESSAGE(at != std::string::npos, head, "\n", torch.out);
    const auto end = torch.out.find('\n', at);
    const std::string port = torch.out.substr(at + head.size(), end - at - head.size());
    CHECK(!port.empty());
    CHECK(port.find_first_not_of("0123456789") == std::string::npos);
    masters.insert(port);
  }
  CHECK(masters.size() == 1);
  // The summary says where each node's /metrics are.
  CHECK(o.err.find("2 node(s) x 2 slot(s) = 4 rank(s) of job 'envtest'") != std::string::npos);
  CHECK(o.err.find("node 0 http://127.0.0.1:") != std::string::npos);
  CHECK(o.err.find("node 1 http://127.0.0.1:") != std::string::npos);
}

TEST_CASE("launch joins partial writes into whole lines and cuts very long lines") {
  const auto o = launch({"--nodes", "1", "--slots", "2", "--", "sh", "-c",
                         "printf abc; sleep 0.2; printf 'def\\nno newline at the end'; "
                         "head -c 70000 /dev/zero | tr '\\0' x"});
  CHECK_MESSAGE(o.status == 0, o.err);
  CHECK(o.out.find("[rank 0] abcdef\n") != std::string::npos);
  CHECK(o.out.find("[rank 1] abcdef\n") != std::string::npos);
  std::istringstream lines(o.out);
  std::size_t xs = 0, count = 0;
  for (std::string line; std::getline(lines, line); ++count) {
    CHECK_MESSAGE((line.rfind("[rank 0] ", 0) == 0 || line.rfind("[rank 1] ", 0) == 0), line.substr(0, 80));
    CHECK(line.size() <= 64 * 1024 + 9);
    for (char c : line) xs += c == 'x' ? 1 : 0;
  }
  CHECK(xs == 2 * 70000);
  CHECK(count >= 6);  // abcdef, the tail cut in two or more, per rank
  CHECK(o.out.back() == '\n');
}

TEST_CASE("the first failing rank decides the exit status; the rest are stopped, by SIGKILL if need be") {
  TempDir marks;
  // Rank 2 fails once every other rank is up; rank 1 ignores SIGTERM (so the grace
  // period ends in SIGKILL); ranks 0 and 3 sleep.
  const std::string script =
      "case $RINGSYNC_RANK in "
      "2) i=0; while [ $(ls \"$T\" | grep -c '^pid\\.[0-9]*$') -lt 3 ] && [ $i -lt 1200 ]; do sleep 0.05; "
      "i=$((i+1)); done; echo failing; exit 3;; "
      "1) trap '' TERM; " + record_pid_then("sleep 300") + ";; "
      "*) " + record_pid_then("exec sleep 300") + ";; esac";
  const auto o = launch({"--nodes", "2", "--slots", "2", "--stop-grace", "1s", "--", "sh", "-c", script},
                        {{"T", marks.path()}});
  CHECK_MESSAGE(o.status == 3, o.err);
  CHECK(o.out.find("[rank 2] failing\n") != std::string::npos);
  CHECK(o.err.find("rank 2 (node 1, local rank 0) exited with status 3; stopping the 3 rank(s) still running") !=
        std::string::npos);
  CHECK(o.err.find("sent SIGKILL") != std::string::npos);
  for (int r : {0, 1, 3}) {
    const pid_t pid = pid_in(marks.file("pid." + std::to_string(r)));
    CHECK_MESSAGE(gone(pid), "rank ", r, " (pid ", pid, ") still runs");
  }
}

TEST_CASE("a rank killed by a signal fails the job with 128 + the signal") {
  const auto o = launch({"--nodes", "1", "--slots", "1", "--", "sh", "-c", "kill -9 $$"});
  CHECK_MESSAGE(o.status == 137, o.err);
  CHECK(o.err.find("rank 0 (node 0, local rank 0) was killed by signal 9") != std::string::npos);
}

TEST_CASE("a command that is not there fails before anything starts") {
  auto o = launch({"--nodes", "2", "--slots", "2", "--", "ringsync-no-such-command"});
  CHECK(o.status == 127);
  CHECK(o.err.find("ringsync-no-such-command: command not found in PATH") != std::string::npos);
  CHECK(o.err.find("node(s) x") == std::string::npos);  // no daemons, no summary
  o = launch({"--nodes", "1", "--slots", "1", "--", "/"});
  CHECK(o.status == 127);
  CHECK(o.err.find("not an executable file") != std::string::npos);
}

TEST_CASE("bad arguments are refused with what to type instead") {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--nodes", "0", "--slots", "1", "--", "true"}, "--nodes must be the number of nodes (daemons), 1 to 64"},
      {{"--nodes", "65", "--slots", "1", "--", "true"}, "1 to 64 (got '65')"},
      {{"--nodes", "2", "--slots", "0", "--", "true"}, "--slots must be"},
      {{"--nodes", "2", "--slots", "4097", "--", "true"}, "1 to 4096 (got '4097')"},
      {{"--nodes", "two", "--slots", "1", "--", "true"}, "(got 'two')"},
      {{"--slots", "1", "--", "true"}, "give --nodes N"},
      {{"--nodes", "1", "--", "true"}, "give --slots L"},
      {{"--nodes", "1", "--slots", "1"}, "missing '--' and the trainer command"},
      {{"--nodes", "1", "--slots", "1", "true"}, "put the trainer command after '--'"},
      {{"--nodes", "1", "--slots", "1", "--"}, "no trainer command after '--'"},
      {{"--nodes", "1", "--slots", "1", "--timeout", "soon", "--", "true"}, "--timeout 'soon'"},
      {{"--nodes", "1", "--slots", "1", "--colour", "--", "true"}, "unknown option '--colour'"},
      {{"--nodes", "1", "--slots"}, "--slots needs a value"},
      {{"--daemon", "/tmp/x.sock", "--slots", "1", "--", "true"}, "is not SOCKET@HOST:PORT"},
      {{"--daemon", "/a@h:1", "--nodes", "2", "--slots", "1", "--", "true"}, "one --daemon per node"},
      {{"--daemon", "/a@h:1", "--slots", "1", "--daemon-arg", "x", "--", "true"}, "with --daemon they run already"},
  };
  for (const auto& [args, message] : cases) {
    CAPTURE(message);
    const auto o = launch(args);
    CHECK(o.status == 2);
    CHECK_MESSAGE(o.err.find(message) != std::string::npos, o.err);
  }
}

TEST_CASE("launch --help documents the options, the environment and the exit statuses") {
  const auto o = launch({"--help"});
  CHECK(o.status == 0);
  for (const char* word : {"--nodes", "--slots", "--job-id", "--daemon-arg", "--log-dir", "--timeout",
                           "--stop-grace", "RINGSYNC_SOCKET", "RINGSYNC_RANK", "RINGSYNC_SIZE",
                           "RINGSYNC_LOCAL_RANK", "RINGSYNC_LOCAL_SIZE", "RINGSYNC_NODE_RANK",
                           "RINGSYNC_NUM_NODES", "RINGSYNC_JOB_ID", "RINGSYNC_DAEMON", "[rank R]", "124", "127"})
    CHECK_MESSAGE(o.out.find(word) != std::string::npos, word);
}

TEST_CASE("a daemon that dies during the job is reported with its log, and fails the job") {
  // Rank 1 kills its own node's daemon (its pid is in the ready file next to the socket).
  const std::string script =
      "if [ $RINGSYNC_RANK = 1 ]; then "
      "kill -9 $(sed -n 's/^pid=//p' \"$(dirname \"$RINGSYNC_SOCKET\")/node-1.ready\"); fi; exec sleep 300";
  const auto o = launch({"--nodes", "2", "--slots", "1", "--", "sh", "-c", script});
  CHECK_MESSAGE(o.status == 1, o.err);
  CHECK(o.err.find("node 1's ringsyncd (pid ") != std::string::npos);
  CHECK(o.err.find("was killed by signal 9 (Killed) during the job") != std::string::npos);
  CHECK(o.err.find("[node 1 ringsyncd] ") != std::string::npos);  // its log's last lines
  CHECK(o.err.find("node 1's daemon is gone; stopping the 2 rank(s) still running") != std::string::npos);
}

TEST_CASE("--timeout stops a job that runs too long, with 124") {
  const auto o = launch({"--nodes", "1", "--slots", "2", "--timeout", "1s", "--", "sleep", "300"});
  CHECK_MESSAGE(o.status == 124, o.err);
  CHECK(o.err.find("the job ran longer than --timeout 1s") != std::string::npos);
}

TEST_CASE("SIGTERM to the launcher stops the ranks and the daemons") {
  TempDir marks;
  TempDir logs;
  Launcher launcher({"--nodes", "1", "--slots", "2", "--log-dir", logs.path(), "--", "sh", "-c",
                     record_pid_then("exec sleep 300")},
                    {{"T", marks.path()}});
  REQUIRE(wait_for_files({marks.file("pid.0"), marks.file("pid.1")}));
  launcher.child().signal(SIGTERM);
  const auto o = launcher.finish();
  CHECK_MESSAGE(o.status == 128 + SIGTERM, o.err);
  CHECK(o.err.find("received SIGTERM") != std::string::npos);
  for (int r : {0, 1}) CHECK(gone(pid_in(marks.file("pid." + std::to_string(r)))));
  // --log-dir keeps the daemon's log, which shows it was asked to stop.
  CHECK(read_file(logs.file("node-0.log")).find("received signal 15") != std::string::npos);
}

TEST_CASE("RINGSYNC_DAEMON names the daemon to run; a missing one is reported") {
  const auto o = launch({"--nodes", "1", "--slots", "1", "--", "true"},
                        {{"RINGSYNC_DAEMON", "/nonexistent/ringsyncd"}});
  CHECK(o.status == 1);
  CHECK(o.err.find("no ringsyncd at /nonexistent/ringsyncd") != std::string::npos);
}

TEST_CASE("a daemon that cannot start is reported with the end of its log") {
  const auto o = launch({"--nodes", "2", "--slots", "1", "--daemon-arg", "--ring-window", "--daemon-arg", "0",
                         "--", "true"});
  CHECK(o.status == 1);
  CHECK_MESSAGE(o.err.find("ringsyncd exited with status 2 during start-up") != std::string::npos, o.err);
  CHECK(o.err.find("ring-window") != std::string::npos);
  CHECK(o.err.find("a first start had failed too") != std::string::npos);
}

TEST_CASE("when the reader of its output goes away, the launcher stops the job as SIGPIPE would") {
  auto [rc, out] = run_command("bash -c '" + bin("ringsync") +
                               " launch --nodes 1 --slots 2 -- yes | head -n 3; exit ${PIPESTATUS[0]}'");
  CHECK_MESSAGE(rc == 128 + SIGPIPE, out);
  CHECK(out.find("the reader of our output went away (SIGPIPE)") != std::string::npos);
}

}  // namespace test_integration_launch
