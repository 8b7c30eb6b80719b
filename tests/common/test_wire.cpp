#include <doctest/doctest.h>

#include <flatbuffers/flatbuffers.h>

#include <cstring>
#include <random>

#include "common/wire.h"
#include "ringsync/wire/client_generated.h"

namespace test_common_wire {

using namespace ringsync;
using namespace ringsync::wire;

namespace {

std::span<const std::uint8_t> body_of(const std::vector<std::uint8_t>& frame) {
  return std::span<const std::uint8_t>(frame).subspan(kFrameHeaderBytes);
}

Message round_trip(const Message& m) {
  const auto frame = encode(m);
  auto len = frame_length(std::span<const std::uint8_t, 4>(frame.data(), 4), kMaxFrameBytes);
  REQUIRE(len.ok());
  REQUIRE(*len == frame.size() - kFrameHeaderBytes);
  // Decoding straight from the frame (body at offset 4, not 8-aligned) must work.
  auto decoded = decode(body_of(frame));
  REQUIRE(decoded.ok());
  return *decoded;
}

std::vector<std::uint8_t> finished(flatbuffers::FlatBufferBuilder& b) {
  return std::vector<std::uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
}

}  // namespace

TEST_CASE("every message survives encode and decode") {
  auto hello = std::get<Hello>(round_trip(Hello{kProtocolVersion, "job-7", 3, 8, 4242}));
  CHECK(hello.job_id == "job-7");
  CHECK(hello.local_rank == 3);
  CHECK(hello.local_size == 8);
  CHECK(hello.pid == 4242);
  CHECK_FALSE(hello.shm_channel);
  CHECK(std::get<Hello>(round_trip(Hello{kProtocolVersion, "j", 0, 1, 1, true})).shm_channel);

  auto reply = std::get<HelloReply>(round_trip(HelloReply{Status::Mismatch("no"), 1, "0.1.0"}));
  CHECK(reply.status.code() == StatusCode::kMismatch);
  CHECK(reply.status.message() == "no");
  CHECK(reply.daemon_version == "0.1.0");
  CHECK(reply.node_rank == 0);
  CHECK(reply.num_nodes == 1);
  auto node = std::get<HelloReply>(round_trip(HelloReply{Status::Ok(), 1, "0.1.0", 2, 3}));
  CHECK(node.node_rank == 2);
  CHECK(node.num_nodes == 3);
  CHECK(node.channel_bytes == 0);
  CHECK(std::get<HelloReply>(round_trip(HelloReply{Status::Ok(), 1, "0.1.0", 0, 1, 8 << 20})).channel_bytes == 8 << 20);

  auto alloc = std::get<AllocReply>(round_trip(AllocReply{9, Status::Ok(), 5, 1 << 20}));
  CHECK(alloc.request_id == 9);
  CHECK(alloc.status.ok());
  CHECK(alloc.buffer_id == 5);
  CHECK(alloc.bytes == 1 << 20);
  CHECK(std::get<AllocBuffer>(round_trip(AllocBuffer{4, 77})).bytes == 77);
  CHECK(std::get<FreeBuffer>(round_trip(FreeBuffer{12})).buffer_id == 12);

  Collective c;
  c.request_id = 1ull << 40;
  c.kind = CollectiveKind::kAllgather;
  c.name = "layer.3/grad";
  c.dtype = DType::kBF16;
  c.op = ReduceOp::kProd;
  c.count = (1ull << 33) + 5;
  c.root = 6;
  c.send = {2, 4096};
  c.recv = {3, 1ull << 35};
  c.bounced = true;
  auto back = std::get<Collective>(round_trip(c));
  CHECK(back.request_id == c.request_id);
  CHECK(back.kind == c.kind);
  CHECK(back.name == c.name);
  CHECK(back.dtype == c.dtype);
  CHECK(back.op == c.op);
  CHECK(back.count == c.count);
  CHECK(back.root == c.root);
  CHECK(back.send.buffer_id == 2);
  CHECK(back.send.offset == 4096);
  CHECK(back.recv.offset == 1ull << 35);
  CHECK(back.bounced);

  auto done = std::get<Completion>(round_trip(Completion{3, Status::PeerLost("rank 2 gone")}));
  CHECK(done.status.code() == StatusCode::kPeerLost);
  CHECK(done.status.message() == "rank 2 gone");

  auto keep = std::get<KeepState>(round_trip(KeepState{8, "model+optimizer", 17, (1ull << 34) + 3}));
  CHECK(keep.request_id == 8);
  CHECK(keep.name == "model+optimizer");
  CHECK(keep.buffer_id == 17);
  CHECK(keep.bytes == (1ull << 34) + 3);
  auto fetch = std::get<FetchState>(round_trip(FetchState{9, "model+optimizer"}));
  CHECK(fetch.request_id == 9);
  CHECK(fetch.name == "model+optimizer");
  CHECK(std::get<NodesWaiting>(round_trip(NodesWaiting{11})).request_id == 11);
  auto waiting = std::get<NodesWaitingReply>(round_trip(NodesWaitingReply{12, 3}));
  CHECK(waiting.request_id == 12);
  CHECK(waiting.waiting == 3);
}

TEST_CASE("a kept state without a name is refused") {
  const auto keep = encode(KeepState{1, "", 2, 3});
  const auto fetch = encode(FetchState{1, ""});
  CHECK(decode(body_of(keep)).status().code() == StatusCode::kProtocolError);
  CHECK(decode(body_of(fetch)).status().code() == StatusCode::kProtocolError);
}

TEST_CASE("frame length: zero and oversized frames are refused") {
  const std::uint8_t zero[4] = {0, 0, 0, 0};
  CHECK(frame_length(std::span<const std::uint8_t, 4>(zero, 4), 1024).status().message() == "empty frame");
  const std::uint8_t big[4] = {0x01, 0x04, 0, 0};  // 1025
  auto over = frame_length(std::span<const std::uint8_t, 4>(big, 4), 1024);
  CHECK(over.status().code() == StatusCode::kProtocolError);
  CHECK(over.status().message().find("exceeds the limit of 1024") != std::string::npos);
  CHECK(*frame_length(std::span<const std::uint8_t, 4>(big, 4), 4096) == 1025);
  const std::uint8_t huge[4] = {0xff, 0xff, 0xff, 0xff};  // capped by kMaxFrameBytes whatever asked
  CHECK_FALSE(frame_length(std::span<const std::uint8_t, 4>(huge, 4), SIZE_MAX).ok());
}

TEST_CASE("garbage and truncated bodies fail verification instead of being read") {
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::vector<std::uint8_t> junk(1 + rng() % 200);
    for (auto& b : junk) b = static_cast<std::uint8_t>(rng());
    auto m = decode(junk);
    if (m.ok()) continue;  // a random buffer may happen to be valid; it must then be safe
    CHECK(m.status().code() == StatusCode::kProtocolError);
  }
  Collective c;
  c.name = "t";
  const auto frame = encode(c);
  std::size_t refused = 0;
  for (std::size_t cut = 1; cut < frame.size() - kFrameHeaderBytes; ++cut) {
    auto m = decode(body_of(frame).first(cut));
    if (!m.ok()) {
      ++refused;
      continue;
    }
    // Only trailing alignment padding can go missing without harm.
    REQUIRE(std::holds_alternative<Collective>(*m));
    CHECK(std::get<Collective>(*m).name == "t");
    CHECK(cut >= frame.size() - kFrameHeaderBytes - 3);
  }
  CHECK(refused >= frame.size() - kFrameHeaderBytes - 4);
}

TEST_CASE("structurally valid frames with bad content are refused") {
  namespace fb = ringsync::wire::client;
  {  // A union type without its table.
    flatbuffers::FlatBufferBuilder b;
    b.Finish(fb::CreateFrame(b, fb::Body::Hello, 0));
    auto m = decode(finished(b));
    CHECK(m.status().message().find("carries no message") != std::string::npos);
  }
  {  // No body at all.
    flatbuffers::FlatBufferBuilder b;
    b.Finish(fb::CreateFrame(b));
    CHECK(decode(finished(b)).status().message().find("no or unknown message type") !=
          std::string::npos);
  }
  {  // Enum values from the future.
    flatbuffers::FlatBufferBuilder b;
    auto name = b.CreateString("x");
    auto c = fb::CreateCollective(b, 1, fb::CollectiveKind::Allreduce, name,
                                  static_cast<fb::DType>(99));
    b.Finish(fb::CreateFrame(b, fb::Body::Collective, c.Union()));
    CHECK(decode(finished(b)).status().message() == "unknown dtype 99");
  }
  {
    flatbuffers::FlatBufferBuilder b;
    auto name = b.CreateString("x");
    auto c = fb::CreateCollective(b, 1, static_cast<fb::CollectiveKind>(17), name);
    b.Finish(fb::CreateFrame(b, fb::Body::Collective, c.Union()));
    CHECK(decode(finished(b)).status().message() == "unknown collective kind 17");
  }
  {  // Required fields.
    flatbuffers::FlatBufferBuilder b;
    auto c = fb::CreateCollective(b, 1);
    b.Finish(fb::CreateFrame(b, fb::Body::Collective, c.Union()));
    CHECK(decode(finished(b)).status().message() == "collective without a tensor name");
    flatbuffers::FlatBufferBuilder h;
    h.Finish(fb::CreateFrame(h, fb::Body::Hello, fb::CreateHello(h, 1).Union()));
    CHECK(decode(finished(h)).status().message() == "hello without a job id");
  }
  {  // A status code the client does not know.
    flatbuffers::FlatBufferBuilder b;
    auto c = fb::CreateCompletion(b, 1, static_cast<fb::StatusCode>(200));
    b.Finish(fb::CreateFrame(b, fb::Body::Completion, c.Union()));
    CHECK(decode(finished(b)).status().message() == "unknown status code 200");
  }
}

}  // namespace test_common_wire
