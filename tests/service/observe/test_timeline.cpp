// The timeline file is read back with a real JSON parser (python3's json
// module, strict about control characters and UTF-8), which prints one line
// per event for the checks here.
#include "service/observe/timeline.h"

#include <doctest/doctest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "common/subprocess.h"

namespace test_service_observe_timeline {

using namespace ringsync;
using namespace ringsync::service;
using namespace std::chrono_literals;
using Clock = observe::Timeline::Clock;

namespace {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ringsync-timeline-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// argv[2] "closed": the file must be a complete array. "open": it must lack
// only the closing bracket. Strings are printed as UTF-8 hex so that any
// bytes compare exactly.
constexpr const char* kDumpScript = R"(import json, sys
text = open(sys.argv[1], encoding='utf-8').read()
if sys.argv[2] == 'open':
    assert not text.rstrip().endswith(']'), 'closed too early'
    text += ']'
d = json.loads(text)
assert isinstance(d, list)
h = lambda s: str(s).encode('utf-8').hex()
print('events', len(d))
for e in d:
    a = e.get('args', {})
    print('\t'.join([e['ph'], h(e['name']), str(e['pid']), str(e.get('tid', -1)),
                     repr(float(e.get('ts', -1))), repr(float(e.get('dur', -1))), e.get('s', '-'),
                     ' '.join(h(k) + '=' + h(v) for k, v in sorted(a.items()))]))
)";

struct Event {
  std::string ph, name, scope;
  long long pid = -1, tid = -1;
  double ts = -1, dur = -1;
  std::map<std::string, std::string> args;
};

std::string unhex(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (;;) {
    const auto at = s.find(sep, start);
    parts.push_back(s.substr(start, at - start));
    if (at == std::string::npos) return parts;
    start = at + 1;
  }
}

struct Trace {
  std::vector<Event> events;

  std::vector<Event> with_ph(const std::string& ph) const {
    std::vector<Event> out;
    for (const auto& e : events)
      if (e.ph == ph) out.push_back(e);
    return out;
  }
  std::vector<Event> named(const std::string& name) const {
    std::vector<Event> out;
    for (const auto& e : events)
      if (e.name == name) out.push_back(e);
    return out;
  }
  // Lane names by tid, from the thread_name metadata.
  std::map<long long, std::string> lane_names() const {
    std::map<long long, std::string> out;
    for (const auto& e : named("thread_name")) {
      CHECK_MESSAGE(out.count(e.tid) == 0, "lane " << e.tid << " named twice");
      out[e.tid] = e.args.at("name");
    }
    return out;
  }
  long long lane_of(const std::string& tensor) const {
    for (const auto& [tid, name] : lane_names())
      if (name == tensor) return tid;
    return -1;
  }
};

Trace parse(const TempDir& dir, const std::string& path, const std::string& mode = "closed") {
  static int calls = 0;
  const std::string out = dir.file("dump-" + std::to_string(++calls) + ".txt");
  auto child = Child::start({"/usr/bin/env", "python3", "-c", kDumpScript, path, mode}, {}, out);
  REQUIRE_MESSAGE(child.ok(), child.status().to_string());
  const bool succeeded = child->succeeded(60s);
  const std::string text = read_file(out);
  REQUIRE_MESSAGE(succeeded, "python3 could not read the trace:\n" << text);
  Trace trace;
  std::istringstream lines(text);
  std::string line;
  std::size_t expected = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("events ", 0) == 0) {
      expected = std::stoul(line.substr(7));
      continue;
    }
    const auto f = split(line, '\t');
    REQUIRE(f.size() == 8);
    Event e;
    e.ph = f[0];
    e.name = unhex(f[1]);
    e.pid = std::stoll(f[2]);
    e.tid = std::stoll(f[3]);
    e.ts = std::stod(f[4]);
    e.dur = std::stod(f[5]);
    e.scope = f[6];
    if (!f[7].empty()) {
      for (const auto& kv : split(f[7], ' ')) {
        const auto eq = kv.find('=');
        e.args[unhex(kv.substr(0, eq))] = unhex(kv.substr(eq + 1));
      }
    }
    trace.events.push_back(std::move(e));
  }
  REQUIRE(trace.events.size() == expected);
  return trace;
}

// "t" + std::to_string(i) trips a false -Wrestrict in g++ 12.
std::string numbered(std::string prefix, long long i) {
  prefix += std::to_string(i);
  return prefix;
}

std::unique_ptr<observe::Timeline> open_timeline(const std::string& path, std::uint32_t rank,
                                        observe::TimelineOptions options = {}) {
  auto opened = observe::Timeline::open(path, rank, options);
  REQUIRE_MESSAGE(opened.ok(), opened.status().to_string());
  return std::move(opened).value();
}

}  // namespace

TEST_CASE("timeline: phases and instants land on per-tensor lanes, in microseconds since open") {
  TempDir dir;
  const std::string path = dir.file("node3.json");
  auto timeline = open_timeline(path, 3);
  const auto t0 = timeline->origin();
  timeline->phase("grad/w", "NEGOTIATE", t0 + 1ms, t0 + 1ms + 250500ns, {{"bytes", "4096"}, {"peers", "2"}});
  timeline->phase("grad/b", "ALLGATHER", t0 + 2ms, t0 + 3ms);
  timeline->phase("grad/w", "COPY_OUT", t0 + 4ms, t0 + 3ms);  // end before start
  timeline->instant("grad/w", "cache hit", t0 + 5ms);
  REQUIRE(timeline->close().ok());

  const Trace trace = parse(dir, path);
  for (const auto& e : trace.events) CHECK(e.pid == 3);

  const auto process = trace.named("process_name");
  REQUIRE(process.size() == 1);
  CHECK(process[0].ph == "M");
  CHECK(process[0].args.at("name") == "ringsyncd node 3");
  CHECK(trace.events.front().name == "process_name");

  const auto lanes = trace.lane_names();
  CHECK(lanes.size() == 2);
  const long long w = trace.lane_of("grad/w");
  const long long b = trace.lane_of("grad/b");
  CHECK(w > 0);
  CHECK(b > 0);
  CHECK(w != b);

  const auto negotiate = trace.named("NEGOTIATE");
  REQUIRE(negotiate.size() == 1);
  CHECK(negotiate[0].ph == "X");
  CHECK(negotiate[0].tid == w);
  CHECK(negotiate[0].ts == doctest::Approx(1000.0));
  CHECK(negotiate[0].dur == doctest::Approx(250.5));
  CHECK(negotiate[0].args == std::map<std::string, std::string>{{"bytes", "4096"}, {"peers", "2"}});

  const auto allgather = trace.named("ALLGATHER");
  REQUIRE(allgather.size() == 1);
  CHECK(allgather[0].tid == b);
  CHECK(allgather[0].ts == doctest::Approx(2000.0));
  CHECK(allgather[0].dur == doctest::Approx(1000.0));
  CHECK(allgather[0].args.empty());

  const auto copy_out = trace.named("COPY_OUT");
  REQUIRE(copy_out.size() == 1);
  CHECK(copy_out[0].dur == 0.0);

  const auto hit = trace.named("cache hit");
  REQUIRE(hit.size() == 1);
  CHECK(hit[0].ph == "i");
  CHECK(hit[0].scope == "t");
  CHECK(hit[0].tid == w);
  CHECK(hit[0].ts == doctest::Approx(5000.0));

  // A lane is named before its first event.
  for (const auto& tensor : {"grad/w", "grad/b"}) {
    const long long tid = trace.lane_of(tensor);
    std::size_t named_at = 0, first_event = 0;
    for (std::size_t i = 0; i < trace.events.size(); ++i) {
      const auto& e = trace.events[i];
      if (e.tid != tid) continue;
      if (e.name == "thread_name" && named_at == 0) named_at = i;
      if (e.ph != "M" && first_event == 0) first_event = i;
    }
    CHECK(named_at < first_event);
  }
}

TEST_CASE("timeline: events from several threads all arrive, each on its tensor's lane") {
  TempDir dir;
  const std::string path = dir.file("threads.json");
  observe::TimelineOptions options;
  options.flush_bytes = 512;  // many small batches while recording goes on
  options.flush_interval = 5ms;
  auto timeline = open_timeline(path, 0, options);

  constexpr int kThreads = 6;
  constexpr int kEvents = 400;
  constexpr int kTensors = 10;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEvents; ++i) {
        const auto start = Clock::now();
        timeline->phase(numbered("t", i % kTensors), "REDUCE_SCATTER", start, Clock::now(),
                        {{"thread", std::to_string(t)}, {"seq", std::to_string(i)}});
        if (i % 100 == 0) timeline->instant("t0", "mark", Clock::now());
        if (t == 0 && i == kEvents / 2) CHECK(timeline->flush().ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  REQUIRE(timeline->close().ok());

  const Trace trace = parse(dir, path);
  CHECK(trace.lane_names().size() == kTensors);
  const auto phases = trace.with_ph("X");
  REQUIRE(phases.size() == kThreads * kEvents);
  std::map<int, std::set<int>> seen;  // thread -> seqs
  for (const auto& e : phases) {
    const int t = std::stoi(e.args.at("thread"));
    const int i = std::stoi(e.args.at("seq"));
    CHECK(e.tid == trace.lane_of(numbered("t", i % kTensors)));
    CHECK(e.dur >= 0.0);
    seen[t].insert(i);
  }
  REQUIRE(seen.size() == kThreads);
  for (const auto& [t, seqs] : seen) {
    CHECK(seqs.size() == kEvents);
    CHECK(*seqs.begin() == 0);
    CHECK(*seqs.rbegin() == kEvents - 1);
  }
  CHECK(trace.named("mark").size() == kThreads * (kEvents / 100));
}

TEST_CASE("timeline: awkward names are escaped and read back intact") {
  const std::string replacement = "\xEF\xBF\xBD";  // U+FFFD
  // name as recorded -> name as a JSON reader sees it
  const std::vector<std::pair<std::string, std::string>> names = {
      {"quote\"d", "quote\"d"},
      {"back\\slash\\", "back\\slash\\"},
      {"new\nline\ttab\rcr\bbs\fff", "new\nline\ttab\rcr\bbs\fff"},
      {std::string("nul\0byte", 8), std::string("nul\0byte", 8)},
      {"\x01\x1f\x7f ctrl", "\x01\x1f\x7f ctrl"},
      {"grad/\xC3\xBC/\xE6\x97\xA5\xE6\x9C\xAC/\xF0\x9F\x98\x80", "grad/\xC3\xBC/\xE6\x97\xA5\xE6\x9C\xAC/\xF0\x9F\x98\x80"},
      {"bad \xFF\xFE utf8", "bad " + replacement + replacement + " utf8"},
      {"overlong \xC0\xAF", "overlong " + replacement + replacement},
      {"truncated \xE6\x97", "truncated " + replacement + replacement},
      {"</script>{\"ph\":\"X\"},", "</script>{\"ph\":\"X\"},"},
      {"", ""},
  };
  TempDir dir;
  const std::string path = dir.file("escape.json");
  auto timeline = open_timeline(path, 1);
  const auto t0 = timeline->origin();
  for (const auto& [raw, read] : names) {
    timeline->phase(raw, raw, t0, t0 + 1us, {{raw, raw}});
    timeline->instant(raw, raw, t0);
  }
  REQUIRE(timeline->close().ok());

  const Trace trace = parse(dir, path);
  std::set<std::string> expected_lanes;
  for (const auto& [raw, read] : names) expected_lanes.insert(read);
  std::set<std::string> lanes;
  for (const auto& [tid, name] : trace.lane_names()) lanes.insert(name);
  CHECK(lanes == expected_lanes);

  for (const auto& [raw, read] : names) {
    const long long tid = trace.lane_of(read);
    CHECK(tid > 0);
    int phases = 0, instants = 0;
    for (const auto& e : trace.events) {
      if (e.tid != tid || e.ph == "M") continue;
      CHECK(e.name == read);
      if (e.ph == "X") {
        ++phases;
        CHECK(e.args == std::map<std::string, std::string>{{read, read}});
      } else {
        ++instants;
      }
    }
    CHECK(phases == 1);
    CHECK(instants == 1);
  }
}

TEST_CASE("timeline: lanes are bounded; later tensors share one lane and keep their names") {
  TempDir dir;
  const std::string path = dir.file("lanes.json");

  SUBCASE("a small bound") {
    observe::TimelineOptions options;
    options.max_lanes = 3;
    auto timeline = open_timeline(path, 0, options);
    const auto t0 = timeline->origin();
    for (int i = 0; i < 10; ++i) timeline->phase(numbered("n", i), "ALLGATHER", t0, t0 + 1us);
    timeline->phase("n0", "BROADCAST", t0, t0 + 1us);
    timeline->instant("n9", "late", t0);
    REQUIRE(timeline->close().ok());

    const Trace trace = parse(dir, path);
    const auto lanes = trace.lane_names();
    REQUIRE(lanes.size() == 4);
    std::set<std::string> lane_set;
    for (const auto& [tid, name] : lanes) lane_set.insert(name);
    CHECK(lane_set == std::set<std::string>{"n0", "n1", "n2", "(other tensors)"});
    const long long other = trace.lane_of("(other tensors)");
    for (const auto& e : trace.named("ALLGATHER")) {
      const std::string tensor = e.args.count("tensor") ? e.args.at("tensor") : "";
      if (e.tid == other) {
        CHECK(tensor.size() == 2);
        CHECK(tensor >= "n3");
      } else {
        CHECK(tensor.empty());
      }
    }
    CHECK(trace.named("ALLGATHER").size() == 10);
    const auto broadcast = trace.named("BROADCAST");
    REQUIRE(broadcast.size() == 1);
    CHECK(broadcast[0].tid == trace.lane_of("n0"));
    CHECK(broadcast[0].args.empty());
    const auto late = trace.named("late");
    REQUIRE(late.size() == 1);
    CHECK(late[0].tid == other);
    CHECK(late[0].args.at("tensor") == "n9");
  }

  SUBCASE("the default bound") {
    auto timeline = open_timeline(path, 0);
    const auto t0 = timeline->origin();
    for (int i = 0; i < 5000; ++i) timeline->phase(numbered("tensor", i), "NEGOTIATE", t0, t0);
    REQUIRE(timeline->close().ok());
    const Trace trace = parse(dir, path);
    CHECK(trace.lane_names().size() == observe::TimelineOptions{}.max_lanes + 1);
    CHECK(trace.with_ph("X").size() == 5000);
  }
}

TEST_CASE("timeline: a file that cannot be created is a clear error") {
  TempDir dir;
  const std::string missing = dir.file("no-such-dir/t.json");
  auto opened = observe::Timeline::open(missing, 0);
  REQUIRE_FALSE(opened.ok());
  CHECK(opened.status().code() == StatusCode::kInvalidArgument);
  CHECK(opened.status().message().find(missing) != std::string::npos);
  CHECK(opened.status().message().find("No such file or directory") != std::string::npos);

  auto directory = observe::Timeline::open(dir.path(), 0);
  REQUIRE_FALSE(directory.ok());
  CHECK(directory.status().message().find("Is a directory") != std::string::npos);

  CHECK_FALSE(observe::Timeline::open("", 0).ok());
}

TEST_CASE("timeline: the file loads as a trace before close") {
  TempDir dir;
  const std::string path = dir.file("live.json");

  SUBCASE("written by the periodic flush") {
    observe::TimelineOptions options;
    options.flush_interval = 10ms;
    auto timeline = open_timeline(path, 2, options);
    timeline->phase("w", "LOCAL_REDUCE", Clock::now(), Clock::now());
    // Bounded wait for the writer's timer; nothing else writes.
    bool written = false;
    for (int i = 0; i < 2000 && !written; ++i) {
      written = read_file(path).find("LOCAL_REDUCE") != std::string::npos;
      if (!written) std::this_thread::sleep_for(5ms);
    }
    REQUIRE(written);
    const Trace trace = parse(dir, path, "open");
    CHECK(trace.named("LOCAL_REDUCE").size() == 1);
  }

  SUBCASE("written by flush()") {
    observe::TimelineOptions options;
    options.flush_interval = std::chrono::hours(1);
    auto timeline = open_timeline(path, 2, options);
    timeline->phase("w", "WAIT_FOR_RANKS", Clock::now(), Clock::now());
    REQUIRE(timeline->flush().ok());
    const Trace trace = parse(dir, path, "open");
    CHECK(trace.named("WAIT_FOR_RANKS").size() == 1);
    CHECK(trace.lane_names().size() == 1);
  }
}

TEST_CASE("timeline: close is idempotent, later events are ignored, the destructor closes") {
  TempDir dir;
  const std::string path = dir.file("close.json");
  {
    auto timeline = open_timeline(path, 0);
    timeline->phase("w", "BROADCAST", Clock::now(), Clock::now());
    CHECK(timeline->close().ok());
    CHECK(timeline->close().ok());
    timeline->phase("w", "AFTER_CLOSE", Clock::now(), Clock::now());
    CHECK(timeline->flush().ok());
  }
  const Trace closed = parse(dir, path);
  CHECK(closed.named("BROADCAST").size() == 1);
  CHECK(closed.named("AFTER_CLOSE").empty());

  const std::string path2 = dir.file("destructor.json");
  {
    auto timeline = open_timeline(path2, 0);
    timeline->phase("w", "COPY_OUT", Clock::now(), Clock::now());
  }
  CHECK(parse(dir, path2).named("COPY_OUT").size() == 1);
}

TEST_CASE("timeline: a writer that falls behind drops events, counts them and says so") {
  TempDir dir;
  const std::string path = dir.file("dropped.json");
  observe::TimelineOptions options;
  // The writer never wakes before close(), as if the disk had stalled.
  options.flush_bytes = std::size_t{1} << 30;
  options.flush_interval = std::chrono::hours(1);
  options.max_buffered_bytes = 4096;
  auto timeline = open_timeline(path, 0, options);
  constexpr int kEvents = 1000;
  for (int i = 0; i < kEvents; ++i) timeline->phase("w", "ALLGATHER", Clock::now(), Clock::now());
  const std::uint64_t dropped = timeline->dropped_events();
  CHECK(dropped > 0);
  CHECK(dropped < kEvents);
  REQUIRE(timeline->close().ok());

  const Trace trace = parse(dir, path);
  CHECK(trace.named("ALLGATHER").size() + dropped == kEvents);
  const auto note = trace.named("timeline dropped " + std::to_string(dropped) + " events");
  REQUIRE(note.size() == 1);
  CHECK(note[0].ph == "i");
  CHECK(note[0].scope == "p");
}

}  // namespace test_service_observe_timeline
