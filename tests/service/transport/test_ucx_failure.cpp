// UcxTransport when a node fails: killed, stopped, cancelled, or gone away.
#include <doctest/doctest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "common/subprocess.h"
#include "tests/service/ucx_test_job.h"

namespace test_service_transport_ucx_failure {

using ringsync::Child;
using ringsync::Status;
using ringsync::StatusCode;
using ringsync::service::transport::make_tag;
using namespace ringsync::test;
namespace fs = std::filesystem;

namespace {

bool all_done(const std::deque<Outcome>& outcomes) {
  for (const auto& o : outcomes) {
    if (!o.done) return false;
  }
  return true;
}

bool names_node(const Status& s, int node) {
  return s.message().find("node " + std::to_string(node)) != std::string::npos;
}

// A private directory, removed with its files.
class ScratchDir {
 public:
  ScratchDir() {
    char name[] = "/tmp/ringsync-ucx-XXXXXX";
    REQUIRE(::mkdtemp(name) != nullptr);
    path_ = name;
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Node 1 in a child process (tests/ucx/ucx_peer_main.cpp), node 0 here, joined
// by a two-node UcxTransport. Node 1 says hello, then streams 1 MiB messages.
struct ProcessPair {
  ScratchDir dir;
  Child peer;
  std::unique_ptr<UcxTransport> transport;

  explicit ProcessPair(const std::string& transports) {
    const std::string helper = std::string(RINGSYNC_BIN_DIR) + "/ringsync-ucx-peer";
    REQUIRE_MESSAGE(fs::exists(helper), "build the ringsync-ucx-peer target (tests/ucx) first");
    auto started = Child::start({helper, dir.path().string(), transports}, {},
                                (dir.path() / "peer.log").string());
    REQUIRE_MESSAGE(started.ok(), started.status().to_string());
    peer = std::move(started).value();

    auto context = make_context(loopback(transports));
    const auto own = context->address();
    write_file(dir.path() / "survivor.address", own);
    const auto peer_address = read_peer_address();
    auto created = UcxTransport::create(std::move(context), 0, {own, peer_address});
    REQUIRE_MESSAGE(created.ok(), created.status().to_string());
    transport = std::move(created).value();

    std::byte hello{0};
    Outcome greeting;
    transport->recv(1, make_tag(0, 0, 1), &hello, 1, greeting.callback());
    REQUIRE_MESSAGE(drive({transport.get()}, [&] { return greeting.done; }), "node 1 never said hello; its log:\n" << log());
    REQUIRE_MESSAGE(greeting.status.ok(), greeting.status.to_string());
  }

  std::string log() const {
    std::ifstream in(dir.path() / "peer.log");
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }

  static void write_file(const fs::path& path, const std::vector<std::byte>& bytes) {
    const fs::path partial = path.string() + ".partial";
    {
      std::ofstream out(partial, std::ios::binary);
      out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    }
    fs::rename(partial, path);
  }

  std::vector<std::byte> read_peer_address() {
    const fs::path path = dir.path() / "peer.address";
    for (int i = 0; i < 3000 && !fs::exists(path); ++i) {  // at most 30 s
      REQUIRE(peer.running());
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::ifstream in(path, std::ios::binary);
    std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    REQUIRE_MESSAGE(!raw.empty(), "the peer wrote no address; see its log");
    std::vector<std::byte> bytes(raw.size());
    std::memcpy(bytes.data(), raw.data(), raw.size());
    return bytes;
  }
};

}  // namespace

TEST_CASE("a peer killed mid-transfer: every operation with it completes with PeerLost") {
  ProcessPair pair("tcp,self");
  UcxTransport& t = *pair.transport;

  // Take part of the stream; then, without progressing, post receives for the
  // rest of it (node 1 cannot send them all without this node's progress), one
  // that node 1 never sends, and a send it never receives; then kill node 1.
  constexpr std::size_t kChunk = 1 << 20;
  std::vector<std::vector<std::byte>> chunks(68, std::vector<std::byte>(kChunk));
  std::deque<Outcome> early, stream, other;
  for (std::uint16_t i = 0; i < 4; ++i) t.recv(1, make_tag(1, 0, i), chunks[i].data(), kChunk, early.emplace_back().callback());
  REQUIRE(drive({&t}, [&] { return all_done(early); }));
  for (auto& o : early) REQUIRE(o.status.ok());
  for (std::uint16_t i = 4; i < chunks.size(); ++i) {
    t.recv(1, make_tag(1, 0, i), chunks[i].data(), kChunk, stream.emplace_back().callback());
  }
  std::vector<std::byte> never(4096);
  const std::vector<std::byte> unwanted(16 << 20, std::byte{3});
  t.recv(1, make_tag(9, 0, 0), never.data(), never.size(), other.emplace_back().callback());
  t.send(1, make_tag(9, 0, 1), unwanted.data(), unwanted.size(), other.emplace_back().callback());

  const auto killed = std::chrono::steady_clock::now();
  pair.peer.signal(SIGKILL);
  REQUIRE(pair.peer.wait(std::chrono::seconds(30)).has_value());
  REQUIRE(drive({&t}, [&] { return all_done(stream) && all_done(other); }));
  const auto detected = std::chrono::steady_clock::now() - killed;
  MESSAGE("node 1's death noticed "
          << std::chrono::duration_cast<std::chrono::milliseconds>(detected).count() << " ms after SIGKILL");

  CHECK(t.peer_lost(1));
  CHECK_FALSE(t.peer_lost(0));
  for (auto& o : other) {
    CHECK(o.status.code() == StatusCode::kPeerLost);
    CHECK_MESSAGE(names_node(o.status, 1), o.status.message());
  }
  // What node 1 sent before it died arrived intact, in order; the rest is lost.
  std::size_t arrived = 0;
  while (arrived < stream.size() && stream[arrived].status.ok()) ++arrived;
  CHECK(arrived < stream.size());
  for (std::size_t i = 0; i < arrived; ++i) CHECK(chunks[4 + i] == std::vector<std::byte>(kChunk, std::byte{7}));
  for (std::size_t i = arrived; i < stream.size(); ++i) {
    CHECK_MESSAGE(stream[i].status.code() == StatusCode::kPeerLost, stream[i].status.to_string());
  }
  CHECK(t.outstanding() == 0);

  Outcome later;
  t.send(1, make_tag(10, 0, 0), unwanted.data(), 8, later.callback());
  REQUIRE(drive({&t}, [&] { return later.done; }));
  CHECK(later.status.code() == StatusCode::kPeerLost);
}

TEST_CASE("a stopped peer: cancel_all at the owner's deadline completes everything at once") {
  ProcessPair pair("tcp,sm,self");
  UcxTransport& t = *pair.transport;
  std::vector<std::byte> never(4096), part(1 << 20);
  const std::vector<std::byte> unwanted(16 << 20, std::byte{3});
  std::deque<Outcome> ops;
  t.recv(1, make_tag(9, 0, 0), never.data(), never.size(), ops.emplace_back().callback());
  t.recv(1, make_tag(1, 0, 0), part.data(), part.size(), ops.emplace_back().callback());
  t.send(1, make_tag(9, 0, 1), unwanted.data(), unwanted.size(), ops.emplace_back().callback());
  pair.peer.signal(SIGSTOP);
  for (int i = 0; i < 50; ++i) t.progress();

  const Status deadline = Status::PeerLost("node 1 missed its heartbeat deadline");
  t.cancel_all(deadline);
  for (auto& o : ops) {
    REQUIRE(o.done);  // before cancel_all returned
    if (!o.status.ok()) CHECK(o.status.message() == deadline.message());
  }
  CHECK(ops[0].status.message() == deadline.message());  // never sent: cannot have succeeded
  CHECK(ops[2].status.message() == deadline.message());  // never received: cannot have succeeded
  CHECK(t.outstanding() == 0);

  Outcome later;
  t.recv(1, make_tag(9, 0, 2), never.data(), never.size(), later.callback());
  REQUIRE(drive({&t}, [&] { return later.done; }));
  CHECK(later.status.message() == deadline.message());
  pair.peer.signal(SIGKILL);
}

TEST_CASE("cancel_all ends the transport; destroying it makes the other node see it lost") {
  auto job = make_job(2, loopback("tcp,self"));
  std::vector<std::byte> buffer(64), big(8 << 20);
  std::deque<Outcome> at0, at1;
  job[0]->recv(1, make_tag(1, 0, 0), buffer.data(), buffer.size(), at0.emplace_back().callback());
  // Never received: it ends with the cancel, or earlier if UCX sent it eagerly
  // (then it completed when it left this node).
  job[0]->send(1, make_tag(1, 0, 1), big.data(), big.size(), at0.emplace_back().callback());
  job[1]->recv(0, make_tag(2, 0, 0), buffer.data(), buffer.size(), at1.emplace_back().callback());
  for (int i = 0; i < 50; ++i) {
    job[0]->progress();
    job[1]->progress();
  }
  REQUIRE_FALSE(all_done(at0));

  const Status why = Status::Timeout("collective 1 exceeded its deadline");
  job[0]->cancel_all(why);
  REQUIRE(all_done(at0));
  CHECK(at0[0].status.message() == why.message());
  CHECK((at0[1].status.ok() || at0[1].status.message() == why.message()));
  Outcome later;
  job[0]->send(1, make_tag(3, 0, 0), buffer.data(), buffer.size(), later.callback());
  REQUIRE(drive({job[0].get()}, [&] { return later.done; }));
  CHECK(later.status.code() == StatusCode::kTimeout);

  // Node 0's connections close with its worker: node 1's receive from it fails.
  job[0].reset();
  REQUIRE(drive({job[1].get()}, [&] { return all_done(at1); }));
  CHECK(at1[0].status.code() == StatusCode::kPeerLost);
  CHECK_MESSAGE(names_node(at1[0].status, 0), at1[0].status.message());
  CHECK(job[1]->peer_lost(0));
}

TEST_CASE("a callback may cancel_all from inside progress()") {
  auto job = make_job(2, loopback("tcp,self"));
  std::vector<std::byte> a(16), b(16);
  const auto data = pattern(16, 1);
  Outcome second, send;
  const Status why = Status::Closed("the first message ended the job");
  bool first_ok = false;
  job[1]->recv(0, make_tag(1, 0, 0), a.data(), a.size(), [&](const Status& s) {
    first_ok = s.ok();
    job[1]->cancel_all(why);
  });
  job[1]->recv(0, make_tag(1, 0, 1), b.data(), b.size(), second.callback());
  job[0]->send(1, make_tag(1, 0, 0), data.data(), data.size(), send.callback());
  REQUIRE(drive(nodes(job), [&] { return second.done && send.done; }));
  CHECK(first_ok);
  CHECK(second.status.message() == why.message());
}

TEST_CASE("disconnect() ends a job quietly: no node is reported lost") {
  auto job = make_job(3, loopback("tcp,sm,self"));
  for (int r = 0; r < 3; ++r) {  // every pair has talked, so every endpoint is wired up
    for (int p = 0; p < 3; ++p) {
      std::byte x{1}, y{0};
      Outcome s, rcv;
      job[r]->send(p, make_tag(1, 0, 0), &x, 1, s.callback());
      job[p]->recv(r, make_tag(1, 0, 0), &y, 1, rcv.callback());
      REQUIRE(drive(nodes(job), [&] { return s.done && rcv.done; }));
    }
  }
  for (auto& t : job) t->disconnect();
  REQUIRE(drive(nodes(job), [&] {
    for (auto& t : job) {
      if (!t->disconnected()) return false;
    }
    return true;
  }));
  for (int r = 0; r < 3; ++r) {
    for (int p = 0; p < 3; ++p) CHECK_FALSE(job[r]->peer_lost(p));
  }
  Outcome after;
  std::byte z{0};
  job[0]->send(1, make_tag(2, 0, 0), &z, 1, after.callback());
  REQUIRE(drive(nodes(job), [&] { return after.done; }));
  CHECK(after.status.code() == StatusCode::kClosed);
}

TEST_CASE("destroying a transport drops the callbacks of its outstanding operations") {
  auto job = make_job(2, loopback("tcp,self"));
  std::vector<std::byte> buffer(64), big(8 << 20);
  bool ran = false;
  job[0]->recv(1, make_tag(1, 0, 0), buffer.data(), buffer.size(), [&](const Status&) { ran = true; });
  job[0]->send(1, make_tag(1, 0, 1), big.data(), big.size(), [&](const Status&) { ran = true; });
  for (int i = 0; i < 50; ++i) job[0]->progress();
  job[0].reset();
  CHECK_FALSE(ran);
}

TEST_CASE("create() refuses a job it cannot form") {
  const auto options = loopback("tcp,self");
  auto address = make_context(options)->address();
  auto bad_rank = UcxTransport::create(make_context(options), 2, {address, address});
  CHECK(bad_rank.status().code() == StatusCode::kInvalidArgument);
  auto missing = UcxTransport::create(make_context(options), 0, {address, {}});
  CHECK(missing.status().code() == StatusCode::kInvalidArgument);
  CHECK(names_node(missing.status(), 1));
  auto empty = UcxTransport::create(make_context(options), 0, {});
  CHECK(empty.status().code() == StatusCode::kInvalidArgument);
  auto no_context = UcxTransport::create(nullptr, 0, {address});
  CHECK(no_context.status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("UcxContext names a transport list UCX cannot use") {
  UcxOptions options = loopback("no_such_transport");
  auto context = UcxContext::create(options);
  REQUIRE_FALSE(context.ok());
  CHECK(context.status().message().find("no_such_transport") != std::string::npos);
}

TEST_CASE("after cancel_all, UCX writes no more into a receive that was mid-transfer") {
  auto job = make_job(2, loopback("tcp,self"));
  constexpr std::size_t kBytes = 128u << 20;
  const std::vector<std::byte> source(kBytes, std::byte{1});
  std::vector<std::byte> target(kBytes, std::byte{0});
  Outcome send, recv;
  job[1]->recv(0, make_tag(1, 0, 0), target.data(), kBytes, recv.callback());
  job[0]->send(1, make_tag(1, 0, 0), source.data(), kBytes, send.callback());
  for (int i = 0; i < 1'000'000 && target[0] != std::byte{1}; ++i) {
    job[0]->progress();
    job[1]->progress();
  }
  REQUIRE(target[0] == std::byte{1});  // the data has begun to land...
  REQUIRE_FALSE(recv.done);            // ...and has not all landed

  const Status why = Status::Closed("job aborted");
  job[1]->cancel_all(why);
  REQUIRE(recv.done);
  CHECK(recv.status.message() == why.message());
  std::fill(target.begin(), target.end(), std::byte{0x55});
  for (int i = 0; i < 5000; ++i) {  // the sender goes on as far as it can
    job[0]->progress();
    job[1]->progress();
  }
  CHECK(std::count(target.begin(), target.end(), std::byte{0x55}) == static_cast<std::ptrdiff_t>(kBytes));
}

}  // namespace test_service_transport_ucx_failure
