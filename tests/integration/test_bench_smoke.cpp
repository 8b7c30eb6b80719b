// ringsync-bench under `ringsync launch`: the nccl-tests-style table is printed
// once (global rank 0), every row's results are right, the CSV and JSON carry the
// same rows, and bad flags fail clearly. Times are printed, never asserted.
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "daemon_fixture.h"

namespace test_integration_bench_smoke {

using namespace ringsync::test;
using namespace std::chrono_literals;

namespace {

struct Outcome {
  int status = -1;  // exit status, or 128+signal
  std::string out;
  std::string err;
};

// `ringsync launch LAUNCH_ARGS -- ringsync-bench BENCH_ARGS`, stdout and stderr
// apart (through sh, so the launcher itself writes the files).
Outcome launch_bench(const std::vector<std::string>& launch_args,
                     const std::vector<std::string>& bench_args) {
  TempDir dir;
  const std::string redirect = "out=$1; err=$2; shift 2; exec \"$@\" >\"$out\" 2>\"$err\"";
  std::vector<std::string> argv = {"/bin/sh", "-c", redirect, "sh", dir.file("out"),
                                   dir.file("err"), bin("ringsync"), "launch"};
  argv.insert(argv.end(), launch_args.begin(), launch_args.end());
  argv.push_back("--");
  argv.push_back(bin("ringsync-bench"));
  argv.insert(argv.end(), bench_args.begin(), bench_args.end());
  Child child = spawn(argv);
  const auto st = child.wait(300s);
  Outcome o;
  o.out = read_file(dir.file("out"));
  o.err = read_file(dir.file("err"));
  REQUIRE_MESSAGE(st.has_value(), "the job did not finish; stderr so far:\n" << o.err);
  o.status = WIFEXITED(*st) ? WEXITSTATUS(*st) : 128 + WTERMSIG(*st);
  return o;
}

std::vector<std::string> fields(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> f;
  for (std::string w; in >> w;) f.push_back(w);
  return f;
}

// Rank 0's table: its rows by collective, and its lines in order.
struct Table {
  std::vector<std::string> lines;  // without the "[rank 0] " prefix
  std::vector<std::pair<std::string, std::vector<std::string>>> rows;  // collective, fields
};

Table rank0_table(const std::string& out) {
  Table t;
  std::istringstream lines(out);
  std::string section;
  const std::string prefix = "[rank 0] ";
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(prefix, 0) != 0) continue;
    line = line.substr(prefix.size());
    t.lines.push_back(line);
    const auto f = fields(line);
    // A section begins "# allreduce, 4 ranks".
    if (f.size() == 4 && f[0] == "#" && f[3] == "ranks") section = f[1].substr(0, f[1].size() - 1);
    if (!line.empty() && line[0] != '#') t.rows.emplace_back(section, f);
  }
  return t;
}

}  // namespace

TEST_CASE("ringsync-bench on 2 nodes x 2 slots: every collective, every row checked and right") {
  TempDir files;
  const auto o = launch_bench({"--nodes", "2", "--slots", "2"},
                              {"-b", "8", "-e", "1M", "-f", "32", "-n", "3", "-w", "1", "-t", "all",
                               "--csv", files.file("rows.csv"), "--json", files.file("rows.json")});
  REQUIRE_MESSAGE(o.status == 0, o.err, "\n", o.out);
  const Table t = rank0_table(o.out);
  CHECK(o.out.find("[rank 1]") == std::string::npos);  // only global rank 0 prints
  CHECK(o.out.find("4 ranks (2 node(s) x 2 local)") != std::string::npos);

  // 8, 256, 8K, 256K for each collective; the first size of allgather, reduce_scatter
  // and alltoall is one element per rank.
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"allreduce", "8"},       {"allreduce", "256"},       {"allreduce", "8192"},
      {"allreduce", "262144"},  {"broadcast", "8"},         {"broadcast", "256"},
      {"broadcast", "8192"},    {"broadcast", "262144"},    {"allgather", "16"},
      {"allgather", "256"},     {"allgather", "8192"},      {"allgather", "262144"},
      {"reduce_scatter", "16"}, {"reduce_scatter", "256"},  {"reduce_scatter", "8192"},
      {"reduce_scatter", "262144"}, {"alltoall", "16"},     {"alltoall", "256"},
      {"alltoall", "8192"},     {"alltoall", "262144"}};
  REQUIRE_MESSAGE(t.rows.size() == expected.size(), o.out);
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto& [collective, f] = t.rows[i];
    CAPTURE(i);
    REQUIRE(f.size() == 9);  // size count type redop root time algbw busbw #wrong
    CHECK(collective == expected[i].first);
    CHECK(f[0] == expected[i].second);
    CHECK(f[2] == "float");
    CHECK(f[3] == (collective == "allreduce" || collective == "reduce_scatter" ? "sum" : "none"));
    CHECK(f[4] == (collective == "broadcast" ? "0" : "-1"));
    CHECK(f[8] == "0");
  }
  // allgather's, reduce_scatter's and alltoall's count is one rank's block: 256 B of
  // floats over 4 ranks is 16 each. busbw is algbw x (n-1)/n for all three.
  for (std::size_t i : {9, 13, 17}) {
    CAPTURE(i);
    CHECK(t.rows[i].second[1] == "16");
    const double algbw = std::stod(t.rows[i].second[6]), busbw = std::stod(t.rows[i].second[7]);
    CHECK(busbw <= algbw);
  }
  REQUIRE(t.lines.size() >= 2);
  CHECK(t.lines[t.lines.size() - 2] == "# Out of bounds values : 0 OK");
  CHECK(t.lines.back().rfind("# Avg bus bandwidth    : ", 0) == 0);

  // The files hold the same rows, with the job's shape and a date.
  const std::string csv = read_file(files.file("rows.csv"));
  CHECK(csv.rfind("collective,size_bytes,count,type,redop,root,time_us,median_us,algbw_gbps,busbw_gbps,wrong,"
                  "ranks,nodes,date\n",
                  0) == 0);
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 1 + static_cast<long>(expected.size()));
  {  // every row has a mean and a median time, both measured
    std::istringstream lines(csv);
    std::string line;
    std::getline(lines, line);
    while (std::getline(lines, line)) {
      std::vector<std::string> cells;
      std::istringstream fields(line);
      for (std::string cell; std::getline(fields, cell, ',');) cells.push_back(cell);
      REQUIRE(cells.size() >= 8);
      CHECK_MESSAGE(std::stod(cells[6]) > 0, line);
      CHECK_MESSAGE(std::stod(cells[7]) > 0, line);
    }
  }
  CHECK(csv.find("\nallgather,262144,16384,float,none,-1,") != std::string::npos);
  CHECK(csv.find("\nreduce_scatter,262144,16384,float,sum,-1,") != std::string::npos);
  CHECK(csv.find("\nalltoall,262144,16384,float,none,-1,") != std::string::npos);
  const std::string json = read_file(files.file("rows.json"));
  CHECK(json.find("\"ranks\": 4") != std::string::npos);
  CHECK(json.find("\"nodes\": 2") != std::string::npos);
  CHECK(json.find("\"date\": \"") != std::string::npos);
  CHECK(json.find("\"wrong_total\": 0") != std::string::npos);
  CHECK(json.find("{\"collective\": \"broadcast\", \"size_bytes\": 8192, \"count\": 2048") !=
        std::string::npos);
}

TEST_CASE("ringsync-bench checks every type and reduction exactly across 3 nodes") {
  // Odd ranks, sizes that are not a whole number of elements, half and bfloat16
  // sums and products that must stay exact whatever order the ring reduces in;
  // reduce_scatter's and alltoall's blocks each from its own place.
  const auto o = launch_bench({"--nodes", "3", "--slots", "1"},
                              {"-t", "allreduce,reduce_scatter,alltoall", "-d", "all", "-o", "all",
                               "-b", "5", "-e", "64K", "-f", "97", "-n", "1", "-w", "0"});
  REQUIRE_MESSAGE(o.status == 0, o.err, "\n", o.out);
  const Table t = rank0_table(o.out);
  // allreduce and reduce_scatter: types x ops x sizes 5, 485 and 47045 bytes;
  // alltoall: types x sizes.
  CHECK(t.rows.size() == 2 * 7 * 5 * 3 + 7 * 3);
  for (const auto& [collective, f] : t.rows) {
    REQUIRE(f.size() == 9);
    CHECK_MESSAGE(f[8] == "0", f[0], " ", f[2], " ", f[3]);
  }
}

TEST_CASE("ringsync-bench refuses bad flags, and a root outside the job, with what to type") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"-d quad", "-d 'quad': unknown name 'quad'; use float, double, half, bfloat16"},
      {"-o mean", "unknown name 'mean'; use sum, prod, max, min, avg"},
      {"-b 1M -e 8", "give -b <= -e"},
      {"-f 1", "-f '1': want a whole number from 2"},
      {"-e 12X", "-e '12X'"},
      {"-n", "-n needs a value"},
      {"--colour 2", "unknown option '--colour'"},
  };
  for (const auto& [args, message] : cases) {
    CAPTURE(args);
    // Flags are read before connecting: no daemon is needed to refuse them.
    const auto [rc, out] = run_command(bin("ringsync-bench") + " " + args);
    CHECK(rc == 2);
    CHECK_MESSAGE(out.find(message) != std::string::npos, out);
  }
  // Every rank sees the bad root; they agree to stop, so none waits for the others.
  const auto o = launch_bench({"--nodes", "1", "--slots", "2"}, {"-t", "broadcast", "-r", "2"});
  CHECK(o.status == 2);
  CHECK_MESSAGE(o.err.find("-r 2 is not a rank of this job (2 ranks: 0 to 1)") != std::string::npos,
                o.err);
}

}  // namespace test_integration_bench_smoke
