// UcxDataPlane over real UCX in this process: what each node offers, which
// worker it connects from, and that the chosen links move data both ways.
#include <doctest/doctest.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "service/formation/data_plane.h"
#include "service/transport/ucx_transport.h"

namespace test_service_formation_data_plane {

using namespace ringsync;
using namespace ringsync::service;
using formation::UcxDataPlane;
using transport::Locality;

namespace {

transport::UcxOptions loopback(const std::string& transports) {
  transport::UcxOptions o;
  o.transports = transports;
  o.net_devices = "lo";
  return o;
}

Locality in_namespace(std::uint64_t net) {
  Locality l = Locality::here();
  l.net = net;
  return l;
}

struct Pair {
  std::vector<std::unique_ptr<UcxDataPlane>> planes;
  std::vector<std::unique_ptr<transport::Transport>> transports;
};

// Two nodes: each opens, both connect with both offers.
Result<Pair> connect_pair(const transport::UcxOptions& options, const Locality& a, const Locality& b) {
  Pair pair;
  std::vector<std::vector<std::uint8_t>> offers;
  for (const Locality& where : {a, b}) {
    pair.planes.push_back(std::make_unique<UcxDataPlane>(options, std::vector<int>{}, where));
    auto offer = pair.planes.back()->open();
    if (!offer.ok()) return offer.status();
    offers.push_back(std::move(offer).value());
  }
  for (int rank = 0; rank < 2; ++rank) {
    auto t = pair.planes[rank]->connect(rank, offers, 0);
    if (!t.ok()) return t.status();
    pair.transports.push_back(std::move(t).value());
  }
  return pair;
}

// 1 MiB each way, driven by polling both nodes (bounded: fails after 20 s).
void exchange(Pair& pair) {
  constexpr std::size_t kBytes = 1 << 20;
  std::vector<std::vector<std::uint8_t>> out(2, std::vector<std::uint8_t>(kBytes)), in(2, std::vector<std::uint8_t>(kBytes));
  for (int r = 0; r < 2; ++r)
    for (std::size_t i = 0; i < kBytes; ++i) out[r][i] = static_cast<std::uint8_t>(i * 7 + r);
  int done = 0;
  Status failure = Status::Ok();
  auto count = [&](const Status& s) {
    if (!s.ok()) failure = s;
    ++done;
  };
  for (int r = 0; r < 2; ++r) {
    pair.transports[r]->recv(1 - r, 42, in[r].data(), kBytes, count);
    pair.transports[r]->send(1 - r, 42, out[r].data(), kBytes, count);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (done < 4 && std::chrono::steady_clock::now() < deadline)
    for (auto& t : pair.transports) t->progress();
  REQUIRE_MESSAGE(done == 4, "the exchange did not complete in 20 s");
  REQUIRE_MESSAGE(failure.ok(), failure.to_string());
  CHECK(in[0] == out[1]);
  CHECK(in[1] == out[0]);
}

}  // namespace

TEST_CASE("data plane: daemons in one set of namespaces keep UCX's shared memory") {
  auto pair = connect_pair(loopback(""), Locality::here(), Locality::here());
  REQUIRE_MESSAGE(pair.ok(), pair.status().to_string());
  const std::string lanes = pair->transports[0]->peer_transports(1);
  MESSAGE("UCX's choice between two workers of this process: ", lanes);
  CHECK(lanes.find("tcp") == std::string::npos);
  CHECK(pair->planes[0]->link_note(1).empty());
  CHECK(pair->planes[1]->link_note(0).empty());
  exchange(*pair);
}

TEST_CASE("data plane: a peer on this kernel in another network namespace is reached over the network only") {
  auto pair = connect_pair(loopback(""), in_namespace(1111), in_namespace(2222));
  REQUIRE_MESSAGE(pair.ok(), pair.status().to_string());
  for (int r = 0; r < 2; ++r) {
    const std::string lanes = pair->transports[r]->peer_transports(1 - r);
    CHECK_MESSAGE(lanes == "tcp/lo", lanes);
    const std::string note = pair->planes[r]->link_note(1 - r);
    CHECK_MESSAGE(note.find("no shared memory: node " + std::to_string(1 - r)) == 0, note);
    CHECK_MESSAGE(note.find("does not share its network namespace, which") != std::string::npos, note);
  }
  exchange(*pair);
}

TEST_CASE("data plane: transports pinned to tcp make one worker, whatever the namespaces") {
  auto pair = connect_pair(loopback("tcp,self"), in_namespace(1111), in_namespace(2222));
  REQUIRE_MESSAGE(pair.ok(), pair.status().to_string());
  CHECK(pair->transports[0]->peer_transports(1) == "tcp/lo");
  CHECK(pair->planes[0]->link_note(1).empty());  // nothing was avoided: tcp is what was asked for
  exchange(*pair);
}

TEST_CASE("data plane: shared memory alone cannot cross namespaces: connect() says what to add") {
  auto pair = connect_pair(loopback("sysv,self"), in_namespace(1111), in_namespace(2222));
  REQUIRE(!pair.ok());
  CHECK(pair.status().code() == StatusCode::kInvalidArgument);
  CHECK_MESSAGE(pair.status().message().find("add tcp") != std::string::npos, pair.status().to_string());
}

TEST_CASE("data plane: an offer that is not one is refused, naming the node") {
  UcxDataPlane plane(loopback("tcp,self"), {});
  auto mine = plane.open();
  REQUIRE(mine.ok());
  auto t = plane.connect(0, {*mine, {0x80, 1, 2}}, 0);
  REQUIRE(!t.ok());
  CHECK(t.status().code() == StatusCode::kProtocolError);
  CHECK(t.status().message().find("node 1") == 0);
}

}  // namespace test_service_formation_data_plane
