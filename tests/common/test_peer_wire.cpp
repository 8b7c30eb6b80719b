#include <doctest/doctest.h>

#include <flatbuffers/flatbuffers.h>

#include <random>

#include "common/peer_wire.h"
#include "ringsync/wire/peer_generated.h"

namespace test_common_peer_wire {

using namespace ringsync;
using namespace ringsync::peer_wire;

namespace {

Message round_trip(const Message& m) {
  const auto frame = encode(m);
  auto len = wire::frame_length(std::span<const std::uint8_t, 4>(frame.data(), 4), wire::kMaxFrameBytes);
  REQUIRE(len.ok());
  REQUIRE(*len == frame.size() - wire::kFrameHeaderBytes);
  auto decoded = decode(std::span<const std::uint8_t>(frame).subspan(wire::kFrameHeaderBytes));
  REQUIRE(decoded.ok());
  return *decoded;
}

std::vector<std::uint8_t> finished(flatbuffers::FlatBufferBuilder& b) {
  return std::vector<std::uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
}

}  // namespace

TEST_CASE("peer messages survive encode and decode") {
  PeerHello hello{kProtocolVersion, "job", 2, 4, 8, {5, 6, 7}, {1, 2, 3, 250}, 7, 1 << 20, 64, 32768, 262144, 2,
                  65536, false};
  auto h = std::get<PeerHello>(round_trip(hello));
  CHECK(h.direct_bytes == 65536);
  CHECK_FALSE(h.halving_doubling_folds);
  CHECK(h.verify_results == 2);
  CHECK(h.ring_chunk_bytes == 1 << 20);
  CHECK(h.response_cache == 64);
  CHECK(h.inline_bytes == 32768);
  CHECK(h.halving_doubling_bytes == 262144);
  CHECK(h.job_id == "job");
  CHECK(h.node_rank == 2);
  CHECK(h.num_nodes == 4);
  CHECK(h.slots == 8);
  CHECK(h.nonce == std::vector<std::uint8_t>{5, 6, 7});
  CHECK(h.ucx_address == std::vector<std::uint8_t>{1, 2, 3, 250});
  CHECK(h.epoch == 7);

  auto challenge = std::get<AuthChallenge>(round_trip(AuthChallenge{{1, 2}, {3, 4, 5}}));
  CHECK(challenge.nonce == std::vector<std::uint8_t>{1, 2});
  CHECK(challenge.proof == std::vector<std::uint8_t>{3, 4, 5});
  CHECK(std::get<AuthProof>(round_trip(AuthProof{{8, 9}})).proof == std::vector<std::uint8_t>{8, 9});

  auto r = std::get<PeerHelloReply>(round_trip(PeerHelloReply{false, "wrong job", 1, {9}, 3}));
  CHECK_FALSE(r.accepted);
  CHECK(r.message == "wrong job");
  CHECK(r.ucx_address == std::vector<std::uint8_t>{9});

  auto beat = std::get<Heartbeat>(round_trip(Heartbeat{5, 1ull << 50}));
  CHECK(beat.sequence == 1ull << 50);

  ReadyList ready;
  ready.epoch = 3;
  ready.node_rank = 1;
  ready.tensors.push_back({"w1", wire::CollectiveKind::kAllreduce, DType::kBF16, ReduceOp::kAvg, 1000, 0});
  ready.tensors.push_back({"emb", wire::CollectiveKind::kBroadcast, DType::kF32, ReduceOp::kSum, 7, 5});
  ready.cached = {0x5, 1ull << 63};
  ready.plans_seen = 1ull << 40;
  ready.data.push_back({"w1", {1, 2, 3, 250}});
  ready.data.push_back({"cached-one", {}});
  auto rl = std::get<ReadyList>(round_trip(ready));
  CHECK(rl.plans_seen == 1ull << 40);
  REQUIRE(rl.tensors.size() == 2);
  CHECK(rl.tensors[0].name == "w1");
  CHECK(rl.tensors[0].dtype == DType::kBF16);
  CHECK(rl.tensors[0].op == ReduceOp::kAvg);
  CHECK(rl.tensors[1].kind == wire::CollectiveKind::kBroadcast);
  CHECK(rl.tensors[1].root == 5);
  CHECK(rl.cached == ready.cached);
  REQUIRE(rl.data.size() == 2);
  CHECK(rl.data[0].name == "w1");
  CHECK(rl.data[0].data == std::vector<std::uint8_t>{1, 2, 3, 250});
  CHECK(rl.data[1].name == "cached-one");
  CHECK(rl.data[1].data.empty());
  CHECK(std::get<ReadyList>(round_trip(ReadyList{})).data.empty());

  Plan plan;
  plan.epoch = 3;
  plan.cycle = 99;
  plan.operations.push_back({12, wire::CollectiveKind::kAllreduce, DType::kF32, ReduceOp::kSum, 0,
                             {"a", "b", "c"}, {1, 2, 3}});
  plan.operations.push_back({13, wire::CollectiveKind::kAllreduce, DType::kI32, ReduceOp::kMax, 0,
                             {"small"}, {2}, {1, 0, 0, 0, 7, 0, 0, 0}});
  plan.errors.push_back({"x", "local ranks disagree"});
  auto p = std::get<Plan>(round_trip(plan));
  REQUIRE(p.operations.size() == 2);
  CHECK(p.operations[0].sequence == 12);
  CHECK(p.operations[0].result.empty());
  CHECK(p.operations[1].result == std::vector<std::uint8_t>{1, 0, 0, 0, 7, 0, 0, 0});
  CHECK(p.operations[0].names == std::vector<std::string>{"a", "b", "c"});
  CHECK(p.operations[0].counts == std::vector<std::uint64_t>{1, 2, 3});
  REQUIRE(p.errors.size() == 1);
  CHECK(p.errors[0].message == "local ranks disagree");

  Contributions contributions{6, 2, {}};
  DirectTensor loss;
  loss.tensor = ReadyTensor{"loss", wire::CollectiveKind::kAllreduce, DType::kF64, ReduceOp::kAvg, 1, 0};
  loss.data = {1, 2, 3, 4, 5, 6, 7, 8};
  contributions.tensors.push_back(loss);
  DirectTensor gpu;
  gpu.tensor = ReadyTensor{"gpu", wire::CollectiveKind::kAllreduce, DType::kF32, ReduceOp::kMax, 3, 0};
  contributions.tensors.push_back(gpu);
  auto c = std::get<Contributions>(round_trip(contributions));
  CHECK(c.epoch == 6);
  CHECK(c.origin == 2);
  REQUIRE(c.tensors.size() == 2);
  CHECK(c.tensors[0].tensor.name == "loss");
  CHECK(c.tensors[0].tensor.dtype == DType::kF64);
  CHECK(c.tensors[0].tensor.op == ReduceOp::kAvg);
  CHECK(c.tensors[0].data == std::vector<std::uint8_t>{1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(c.tensors[1].tensor.count == 3);
  CHECK(c.tensors[1].data.empty());

  CHECK(std::get<Goodbye>(round_trip(Goodbye{4, "shutting down"})).reason == "shutting down");
  CHECK_FALSE(std::get<Goodbye>(round_trip(Goodbye{4, "shutting down"})).timed_out);
  CHECK(std::get<Goodbye>(round_trip(Goodbye{4, "moved no data", false, -1, true})).timed_out);

  auto roster = std::get<Roster>(round_trip(Roster{2, {{0, {1, 2}}, {1, {3}}, {2, {}}}}));
  CHECK(roster.epoch == 2);
  REQUIRE(roster.entries.size() == 3);
  CHECK(roster.entries[1].node_rank == 1);
  CHECK(roster.entries[1].ucx_address == std::vector<std::uint8_t>{3});
  CHECK(roster.entries[2].ucx_address.empty());
}

TEST_CASE("bad peer frames are refused with a reason") {
  namespace fb = ringsync::wire::peer;
  std::mt19937 rng(11);
  for (int i = 0; i < 2000; ++i) {
    std::vector<std::uint8_t> junk(1 + rng() % 300);
    for (auto& b : junk) b = static_cast<std::uint8_t>(rng());
    auto m = decode(junk);
    if (!m.ok()) CHECK(m.status().code() == StatusCode::kProtocolError);
  }
  {
    flatbuffers::FlatBufferBuilder b;
    b.Finish(fb::CreatePeerFrame(b, fb::PeerBody::Plan, 0));
    CHECK(decode(finished(b)).status().message().find("carries no message") != std::string::npos);
  }
  {  // names and counts must pair up
    flatbuffers::FlatBufferBuilder b;
    auto names = b.CreateVectorOfStrings(std::vector<std::string>{"a", "b"});
    auto counts = b.CreateVector(std::vector<std::uint64_t>{1});
    auto op = fb::CreateOperation(b, 3, 0, 0, 0, 0, names, counts);
    auto ops = b.CreateVector(std::vector<flatbuffers::Offset<fb::Operation>>{op});
    b.Finish(fb::CreatePeerFrame(b, fb::PeerBody::Plan, fb::CreatePlan(b, 1, 1, ops).Union()));
    CHECK(decode(finished(b)).status().message() == "operation 3 has 2 names and 1 counts");
  }
  {  // only an allreduce has a result to carry
    flatbuffers::FlatBufferBuilder b;
    auto names = b.CreateVectorOfStrings(std::vector<std::string>{"a"});
    auto counts = b.CreateVector(std::vector<std::uint64_t>{1});
    auto result = b.CreateVector(std::vector<std::uint8_t>{1, 2, 3, 4});
    auto op = fb::CreateOperation(b, 4, static_cast<std::uint8_t>(wire::CollectiveKind::kBroadcast), 0, 0, 0,
                                  names, counts, result);
    auto ops = b.CreateVector(std::vector<flatbuffers::Offset<fb::Operation>>{op});
    b.Finish(fb::CreatePeerFrame(b, fb::PeerBody::Plan, fb::CreatePlan(b, 1, 1, ops).Union()));
    CHECK(decode(finished(b)).status().message() == "operation 4 carries a result but is not an allreduce");
  }
  {  // inline data names its tensor
    flatbuffers::FlatBufferBuilder b;
    auto d = fb::CreateInlineData(b, 0, b.CreateVector(std::vector<std::uint8_t>{1}));
    auto ds = b.CreateVector(std::vector<flatbuffers::Offset<fb::InlineData>>{d});
    b.Finish(fb::CreatePeerFrame(b, fb::PeerBody::ReadyList,
                                 fb::CreateReadyList(b, 1, 0, 0, 0, 0, ds).Union()));
    CHECK(decode(finished(b)).status().message() == "inline data without a tensor name");
  }
  {  // unknown dtype in a ready tensor
    flatbuffers::FlatBufferBuilder b;
    auto t = fb::CreateReadyTensor(b, b.CreateString("w"), 0, 42);
    auto ts = b.CreateVector(std::vector<flatbuffers::Offset<fb::ReadyTensor>>{t});
    b.Finish(fb::CreatePeerFrame(b, fb::PeerBody::ReadyList, fb::CreateReadyList(b, 1, 0, ts).Union()));
    CHECK(decode(finished(b)).status().message() == "tensor 'w': unknown dtype 42");
  }
  {  // a contribution describes its tensor
    flatbuffers::FlatBufferBuilder b;
    auto t = fb::CreateDirectTensor(b, 0, b.CreateVector(std::vector<std::uint8_t>{1}));
    auto ts = b.CreateVector(std::vector<flatbuffers::Offset<fb::DirectTensor>>{t});
    b.Finish(fb::CreatePeerFrame(b, fb::PeerBody::Contributions, fb::CreateContributions(b, 1, 1, ts).Union()));
    CHECK(decode(finished(b)).status().message() == "ready tensor without a name");
  }
  {  // with a known op
    flatbuffers::FlatBufferBuilder b;
    auto t = fb::CreateDirectTensor(b, fb::CreateReadyTensor(b, b.CreateString("w"), 0, 0, 77));
    auto ts = b.CreateVector(std::vector<flatbuffers::Offset<fb::DirectTensor>>{t});
    b.Finish(fb::CreatePeerFrame(b, fb::PeerBody::Contributions, fb::CreateContributions(b, 1, 1, ts).Union()));
    CHECK(decode(finished(b)).status().message().find("tensor 'w': unknown") != std::string::npos);
  }
  {
    flatbuffers::FlatBufferBuilder b;
    b.Finish(fb::CreatePeerFrame(b, fb::PeerBody::PeerHello, fb::CreatePeerHello(b, 1).Union()));
    CHECK(decode(finished(b)).status().message() == "peer hello without a job id");
  }
}

}  // namespace test_common_peer_wire
