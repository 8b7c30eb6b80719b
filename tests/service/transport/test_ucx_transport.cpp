// UcxTransport between workers in this process, over real UCX on loopback.
#include <doctest/doctest.h>
#include <poll.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <deque>
#include <thread>

#include "service/transport/ucx_tag.h"
#include "tests/service/ucx_test_job.h"

namespace test_service_transport_ucx_transport {

using ringsync::Status;
using ringsync::StatusCode;
using ringsync::service::transport::make_tag;
using ringsync::service::transport::UcxTagCodec;
using namespace ringsync::test;

TEST_CASE("the UCX tag carries the sender, so equal tags from different nodes stay apart") {
  const UcxTagCodec single(1);
  CHECK(single.sender_bits() == 0);
  CHECK(single.encode(0, 0xfedcba9876543210ULL) == 0xfedcba9876543210ULL);

  const UcxTagCodec three(3);
  CHECK(three.sender_bits() == 2);
  const std::uint64_t tag = make_tag(12345, 6, 7);
  CHECK(three.encode(0, tag) != three.encode(1, tag));
  CHECK(three.encode(1, tag) != three.encode(2, tag));
  for (int sender = 0; sender < 3; ++sender) CHECK(three.sender(three.encode(sender, tag)) == sender);
  // Step and chunk are never touched; only the top of the sequence is dropped.
  CHECK((three.encode(2, tag) & 0xffffffffULL) == (tag & 0xffffffffULL));
  CHECK(three.encode(2, make_tag(1, 0, 0)) == three.encode(2, make_tag(1 + (1u << 30), 0, 0)));
  CHECK(three.encode(2, make_tag(1, 0, 0)) != three.encode(2, make_tag(2, 0, 0)));

  CHECK(UcxTagCodec(2).sender_bits() == 1);
  CHECK(UcxTagCodec(4).sender_bits() == 2);
  CHECK(UcxTagCodec(5).sender_bits() == 3);
  CHECK(UcxTagCodec(1024).sender_bits() == 10);
  CHECK(UcxTagCodec(1024).sender(UcxTagCodec(1024).encode(1023, ~0ULL)) == 1023);
}

TEST_CASE("messages of 0, 1, odd and 4 MiB bytes arrive intact, each under its own tag") {
  std::string transports;
  SUBCASE("tcp") { transports = "tcp,self"; }
  SUBCASE("shared memory") { transports = "tcp,sm,self"; }
  auto job = make_job(2, loopback(transports));
  const std::vector<std::size_t> sizes = {0, 1, 7, 4093, 65537, 4u << 20};

  std::vector<std::vector<std::byte>> sent, received;
  std::deque<Outcome> sends, recvs;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    sent.push_back(pattern(sizes[i], static_cast<unsigned>(i)));
    received.emplace_back(sizes[i], std::byte{0xee});
  }
  // Receives posted in reverse tag order, sends in order: only the tag decides.
  for (std::size_t i = sizes.size(); i-- > 0;) {
    job[1]->recv(0, make_tag(3, 1, static_cast<std::uint16_t>(i)), received[i].data(), sizes[i],
                 recvs.emplace_back().callback());
  }
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    job[0]->send(1, make_tag(3, 1, static_cast<std::uint16_t>(i)), sent[i].data(), sizes[i],
                 sends.emplace_back().callback());
  }
  auto all_done = [&] {
    for (auto& o : sends) if (!o.done) return false;
    for (auto& o : recvs) if (!o.done) return false;
    return true;
  };
  REQUIRE(drive(nodes(job), all_done));
  for (auto& o : sends) CHECK_MESSAGE(o.status.ok(), o.status.to_string());
  for (auto& o : recvs) CHECK_MESSAGE(o.status.ok(), o.status.to_string());
  for (std::size_t i = 0; i < sizes.size(); ++i) CHECK_MESSAGE(received[i] == sent[i], "size " << sizes[i]);
  CHECK(job[0]->outstanding() == 0);
  CHECK(job[1]->outstanding() == 0);
}

TEST_CASE("a node sends to itself") {
  auto job = make_job(2, loopback("tcp,self"));
  const auto sent = pattern(1000, 5);
  std::vector<std::byte> received(1000);
  Outcome send, recv;
  job[1]->send(1, make_tag(1, 0, 0), sent.data(), sent.size(), send.callback());
  job[1]->recv(1, make_tag(1, 0, 0), received.data(), received.size(), recv.callback());
  REQUIRE(drive(nodes(job), [&] { return send.done && recv.done; }));
  CHECK(send.status.ok());
  CHECK(recv.status.ok());
  CHECK(received == sent);
}

TEST_CASE("a receive matches whether it was posted before or after the message arrived") {
  auto job = make_job(2, loopback("tcp,sm,self"));
  for (std::size_t bytes : {std::size_t{100}, std::size_t{3u << 20}}) {
    CAPTURE(bytes);
    const auto early_data = pattern(bytes, 1), late_data = pattern(bytes, 2);
    std::vector<std::byte> early(bytes), late(bytes);
    Outcome early_recv, early_send, late_recv, late_send;

    // Posted before: the receive waits for the message.
    job[1]->recv(0, make_tag(10, 0, 0), early.data(), bytes, early_recv.callback());
    job[0]->send(1, make_tag(10, 0, 0), early_data.data(), bytes, early_send.callback());
    REQUIRE(drive(nodes(job), [&] { return early_recv.done && early_send.done; }));

    // Posted after: the message waits at the receiver (eager data, or a large
    // message's announcement) until the receive arrives.
    job[0]->send(1, make_tag(10, 0, 1), late_data.data(), bytes, late_send.callback());
    for (int i = 0; i < 200; ++i) {
      job[0]->progress();
      job[1]->progress();
    }
    CHECK_FALSE(late_recv.done);
    job[1]->recv(0, make_tag(10, 0, 1), late.data(), bytes, late_recv.callback());
    REQUIRE(drive(nodes(job), [&] { return late_recv.done && late_send.done; }));

    for (Outcome* o : {&early_recv, &early_send, &late_recv, &late_send}) {
      CHECK_MESSAGE(o->status.ok(), o->status.to_string());
    }
    CHECK(early == early_data);
    CHECK(late == late_data);
  }
}

TEST_CASE("equal tags from different senders reach the receive for that sender") {
  auto job = make_job(3, loopback("tcp,sm,self"));
  const auto from1 = pattern(5000, 1), from2 = pattern(5000, 2);
  std::vector<std::byte> got1(5000), got2(5000);
  Outcome s1, s2, r1, r2;
  const auto tag = make_tag(77, 3, 4);
  job[1]->send(0, tag, from1.data(), from1.size(), s1.callback());
  job[2]->send(0, tag, from2.data(), from2.size(), s2.callback());
  // Node 2's message is received first, though node 1's may have arrived first.
  job[0]->recv(2, tag, got2.data(), got2.size(), r2.callback());
  REQUIRE(drive(nodes(job), [&] { return r2.done; }));
  job[0]->recv(1, tag, got1.data(), got1.size(), r1.callback());
  REQUIRE(drive(nodes(job), [&] { return s1.done && s2.done && r1.done; }));
  CHECK(r1.status.ok());
  CHECK(r2.status.ok());
  CHECK(got1 == from1);
  CHECK(got2 == from2);
}

TEST_CASE("a message of another size than the receive completes with an error, not a crash") {
  auto job = make_job(2, loopback("tcp,self"));
  struct Case {
    std::size_t sent, expected;
  };
  for (Case c : {Case{16, 8}, Case{8, 16}, Case{1u << 20, 4096}, Case{4096, 1u << 20}, Case{1, 0}}) {
    CAPTURE(c.sent);
    CAPTURE(c.expected);
    const auto data = pattern(c.sent, 3);
    std::vector<std::byte> into(c.expected);
    Outcome send, recv;
    const auto tag = make_tag(5, static_cast<std::uint16_t>(c.sent % 65536), static_cast<std::uint16_t>(c.expected % 65536));
    job[1]->recv(0, tag, into.data(), into.size(), recv.callback());
    job[0]->send(1, tag, data.data(), data.size(), send.callback());
    REQUIRE(drive(nodes(job), [&] { return send.done && recv.done; }));
    CHECK(recv.status.code() == StatusCode::kProtocolError);
    CHECK(recv.status.message().find("node 0") != std::string::npos);
    CHECK(recv.status.message().find("expected " + std::to_string(c.expected)) != std::string::npos);
  }
  // The pair still works afterwards.
  const auto data = pattern(64, 9);
  std::vector<std::byte> into(64);
  Outcome send, recv;
  job[1]->recv(0, make_tag(6, 0, 0), into.data(), into.size(), recv.callback());
  job[0]->send(1, make_tag(6, 0, 0), data.data(), data.size(), send.callback());
  REQUIRE(drive(nodes(job), [&] { return send.done && recv.done; }));
  CHECK(recv.status.ok());
  CHECK(into == data);
}

TEST_CASE("many messages in flight around a ring of three nodes, each node on its own thread") {
  constexpr int kNodes = 3;
  constexpr int kMessages = 300;
  auto size_of = [](int m) { return static_cast<std::size_t>((m * 7919) % 70000); };  // 0 .. ~68 KiB
  struct Node {
    std::vector<std::vector<std::byte>> out, in;
    int completed = 0, failures = 0, delivered = 0;
    bool finished = false;
  };
  std::vector<Node> state(kNodes);  // outlives the transports, whose callbacks use it
  auto job = make_job(kNodes, loopback("tcp,sm,self"));
  std::vector<std::thread> threads;
  for (int r = 0; r < kNodes; ++r) {
    threads.emplace_back([&, r] {
      UcxTransport& t = *job[r];
      Node& node = state[r];
      const int next = (r + 1) % kNodes, prev = (r + kNodes - 1) % kNodes;
      for (int m = 0; m < kMessages; ++m) {
        node.out.push_back(pattern(size_of(m), static_cast<unsigned>(r * 1000 + m)));
        node.in.emplace_back(size_of(m));
      }
      auto count = [&node](const Status& s) {
        ++node.completed;
        if (!s.ok()) ++node.failures;
      };
      auto recv = [&](int m) { t.recv(prev, make_tag(m, 0, 0), node.in[m].data(), node.in[m].size(), count); };
      // Receives for the odd messages first, then all sends, then the even receives.
      for (int m = 1; m < kMessages; m += 2) recv(m);
      for (int m = 0; m < kMessages; ++m) t.send(next, make_tag(m, 0, 0), node.out[m].data(), node.out[m].size(), count);
      for (int m = 0; m < kMessages; m += 2) recv(m);
      node.finished = drive({&t}, [&] { return node.completed == 2 * kMessages; });
      for (int m = 0; m < kMessages; ++m) {
        if (node.in[m] == pattern(size_of(m), static_cast<unsigned>(prev * 1000 + m))) ++node.delivered;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int r = 0; r < kNodes; ++r) {
    CAPTURE(r);
    CHECK(state[r].finished);
    CHECK(state[r].failures == 0);
    CHECK(state[r].delivered == kMessages);
  }
}

TEST_CASE("the event descriptor wakes a poll() when a message arrives") {
  auto job = make_job(2, loopback("tcp,self"));
  std::byte one{42}, got{0};
  {  // Connect first: the first message also carries the connection set-up.
    Outcome s, r;
    job[0]->send(1, make_tag(1, 0, 0), &one, 1, s.callback());
    job[1]->recv(0, make_tag(1, 0, 0), &got, 1, r.callback());
    REQUIRE(drive(nodes(job), [&] { return s.done && r.done; }));
  }
  REQUIRE(job[1]->event_fd() >= 0);
  Outcome recv;
  job[1]->recv(0, make_tag(2, 0, 0), &got, 1, recv.callback());
  bool armed = false;
  for (int i = 0; i < 1000 && !armed; ++i) armed = !job[1]->progress() && job[1]->arm();
  REQUIRE(armed);

  Outcome send;
  one = std::byte{43};
  job[0]->send(1, make_tag(2, 0, 0), &one, 1, send.callback());
  REQUIRE(drive({job[0].get()}, [&] { return send.done; }));
  CHECK_FALSE(recv.done);
  pollfd fd{job[1]->event_fd(), POLLIN, 0};
  CHECK(::poll(&fd, 1, 30'000) == 1);  // the bound only keeps a broken build from hanging
  REQUIRE(drive({job[1].get()}, [&] { return recv.done; }));
  CHECK(recv.status.ok());
  CHECK(got == std::byte{43});
}

TEST_CASE("arm() refuses while callbacks are due, and progress() runs them") {
  auto job = make_job(2, loopback("tcp,self"));
  Outcome bad;
  job[0]->send(5, make_tag(1, 0, 0), nullptr, 0, bad.callback());  // no node 5: fails at once
  CHECK_FALSE(bad.done);  // callbacks run only inside progress()
  CHECK_FALSE(job[0]->arm());
  CHECK(job[0]->progress());
  REQUIRE(bad.done);
  CHECK(bad.status.code() == StatusCode::kInvalidArgument);
  CHECK(bad.status.message().find("node 5") != std::string::npos);
}

TEST_CASE("in peer-failure mode, shared memory is used only with shm_error_handling") {
  for (bool shm_error_handling : {true, false}) {
    CAPTURE(shm_error_handling);
    UcxOptions options = loopback("tcp,sm,self");
    options.shm_error_handling = shm_error_handling;
    auto job = make_job(2, options);
    std::byte x{1}, y{0};
    Outcome send, recv;
    job[0]->send(1, make_tag(1, 0, 0), &x, 1, send.callback());
    job[1]->recv(0, make_tag(1, 0, 0), &y, 1, recv.callback());
    REQUIRE(drive(nodes(job), [&] { return send.done && recv.done; }));
    const std::string lanes = job[0]->endpoint_info(1);
    const bool shared_memory = lanes.find("sysv/") != std::string::npos || lanes.find("posix/") != std::string::npos;
    CHECK_MESSAGE(shared_memory == shm_error_handling, lanes);
    if (!shm_error_handling) CHECK_MESSAGE(lanes.find("tcp/lo") != std::string::npos, lanes);
  }
}

TEST_CASE("a tcp segment size set in the environment leaves both sizes to it, so UCX starts") {
  // UcxOptions' 256 KiB send segments with a receive segment of 64 KiB from the
  // environment would be refused by UCX (receive smaller than send).
  for (const char* variable : {"UCX_TCP_RX_SEG_SIZE", "UCX_TCP_TX_SEG_SIZE"}) {
    CAPTURE(variable);
    ::setenv(variable, "64K", 1);
    auto context = UcxContext::create(loopback("tcp,self"));
    ::unsetenv(variable);
    CHECK_MESSAGE(context.ok(), context.status().to_string());
  }
  auto job = make_job(2, loopback("tcp,self"));  // and the default pair works end to end
  std::vector<std::byte> out(1 << 20, std::byte{7}), in(1 << 20);
  Outcome send, recv;
  job[0]->send(1, make_tag(1, 0, 0), out.data(), out.size(), send.callback());
  job[1]->recv(0, make_tag(1, 0, 0), in.data(), in.size(), recv.callback());
  REQUIRE(drive(nodes(job), [&] { return send.done && recv.done; }));
  CHECK(in == out);
}

namespace {

// Sends `out` from node 0 to node 1 under `tag`; both complete and it arrives whole.
void check_delivered(const std::vector<std::unique_ptr<UcxTransport>>& job, std::uint64_t tag,
                     const std::vector<std::byte>& out) {
  std::vector<std::byte> in(out.size());
  Outcome send, recv;
  job[0]->send(1, tag, out.data(), out.size(), send.callback());
  job[1]->recv(0, tag, in.data(), in.size(), recv.callback());
  REQUIRE(drive(nodes(job), [&] { return send.done && recv.done; }));
  CHECK(send.status.ok());
  CHECK(recv.status.ok());
  CHECK(in == out);
}

}  // namespace

TEST_CASE("a daemon's tcp segments hold half a ring chunk and UCX's headers; messages around the segment size arrive intact") {
  using ringsync::service::transport::kMaxTcpSegmentBytes;
  using ringsync::service::transport::kTcpHeaderRoom;
  using ringsync::service::transport::tcp_segment_for;
  CHECK(kTcpHeaderRoom >= 64);  // UCP's tag header and UCT tcp's take a few dozen bytes
  CHECK(tcp_segment_for(512 * 1024) == 256 * 1024 + kTcpHeaderRoom);  // two fragments, none left over
  CHECK(tcp_segment_for(4097) == 2049 + kTcpHeaderRoom);
  CHECK(2 * (tcp_segment_for(512 * 1024) - kTcpHeaderRoom) >= 512 * 1024);
  CHECK(tcp_segment_for(std::size_t{1} << 30) == kMaxTcpSegmentBytes);  // --ring-chunk-bytes' largest
  CHECK(kMaxTcpSegmentBytes <= 65535 * 64);  // what UCX's v2 worker addresses can carry

  // A segment of no round size (36 KiB) for 64 KiB chunks: the chunk, a byte
  // more, and several segments' worth each arrive whole and in order.
  UcxOptions options = loopback("tcp,self");
  options.tcp_segment_bytes = tcp_segment_for(64 * 1024);
  auto job = make_job(2, options);
  const std::size_t sizes[] = {64 * 1024, 64 * 1024 + 1, 300 * 1024 + 7};
  for (std::size_t i = 0; i < std::size(sizes); ++i) {
    CAPTURE(sizes[i]);
    check_delivered(job, make_tag(1, static_cast<std::uint16_t>(i), 0),
                    pattern(sizes[i], static_cast<unsigned>(i + 1)));
  }
}

TEST_CASE("the largest tcp segment starts UCX with either worker-address version and carries a message of its size") {
  using ringsync::service::transport::kMaxTcpSegmentBytes;
  using ringsync::service::transport::tcp_segment_for;
  for (const char* version : {"v1", "v2"}) {
    CAPTURE(version);
    ::setenv("UCX_ADDRESS_VERSION", version, 1);
    UcxOptions options = loopback("tcp,self");
    options.tcp_segment_bytes = tcp_segment_for(std::size_t{1} << 30);  // the cap
    auto job = make_job(2, options);
    ::unsetenv("UCX_ADDRESS_VERSION");
    check_delivered(job, make_tag(2, 0, 0), pattern(kMaxTcpSegmentBytes + 4096, 3));  // one full segment and a bit
  }
}

TEST_CASE("lane_transports names each lane's transport and device once, in lane order") {
  using ringsync::service::transport::lane_transports;
  const std::string info =
      "#\n# UCP endpoint \n#\n#               peer: <no debug data>\n"
      "#                 lane[0]:  0:self/memory0.0 md[0]          -> md[0]/self/sysdev[255] am am_bw#0\n"
      "#                 lane[1]:  2:tcp/lo.0 md[1]                -> md[1]/tcp/sysdev[255] rma_bw#0\n"
      "#                 lane[2]:  1:tcp/eth0.100.0 md[1]          -> md[1]/tcp/sysdev[255] rma_bw#1 wireup\n"
      "#                 lane[3]:  3:rc_mlx5/mlx5_0:1.0 md[2]      -> md[2]/ib/sysdev[0] rma_bw#2\n"
      "#                 lane[4]:  2:tcp/lo.0 md[1]                -> md[1]/tcp/sysdev[255] am\n"
      "#\n#                tag_send: 0..<egr/short>..8185..<egr/bcopy>..8192..<rndv>..(inf)\n";
  CHECK(lane_transports(info) == "self/memory0,tcp/lo,tcp/eth0.100,rc_mlx5/mlx5_0:1");
  CHECK(lane_transports("").empty());
  CHECK(lane_transports("# lane[0]: garbage\n").empty());
}

TEST_CASE("peer_transports says what UCX chose for the link: tcp on loopback when pinned") {
  auto job = make_job(2, loopback("tcp,self"));
  const std::string lanes = job[0]->peer_transports(1);
  CHECK_MESSAGE(lanes.find("tcp/lo") != std::string::npos, lanes, "\n", job[0]->endpoint_info(1));
  CHECK(job[0]->peer_transports(5).empty());  // no such node
}

TEST_CASE("verbs_devices lists the RDMA devices the kernel shows, none where the folder is absent") {
  using ringsync::service::transport::verbs_devices;
  CHECK(verbs_devices("/nonexistent/infiniband").empty());
  char dir[] = "/tmp/rs-verbs-XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  const std::string base = dir;
  for (const char* name : {"mlx5_1", "mlx5_0"}) std::filesystem::create_directory(base + "/" + name);
  CHECK(verbs_devices(base) == std::vector<std::string>{"mlx5_0", "mlx5_1"});
  std::filesystem::remove_all(base);
}

}  // namespace test_service_transport_ucx_transport
