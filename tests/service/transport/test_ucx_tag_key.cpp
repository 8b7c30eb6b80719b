// A keyed ring's data plane: tags only its nodes can compute (ucx_tag.h,
// data_plane_tag_key in peer_auth.h), over real UCX on loopback.
#include <doctest/doctest.h>

#include <deque>
#include <set>

#include "service/formation/peer_auth.h"
#include "service/transport/ucx_tag.h"
#include "tests/service/ucx_test_job.h"

namespace test_service_transport_ucx_tag_key {

using ringsync::service::formation::data_plane_tag_key;
using ringsync::service::transport::make_tag;
using ringsync::service::transport::UcxTagCodec;
using namespace ringsync::test;

namespace {

std::uint64_t tag_key(std::string_view key, std::string_view job, std::uint64_t epoch,
                      const std::vector<std::vector<std::uint8_t>>& addresses) {
  auto k = data_plane_tag_key(key, job, epoch, addresses);
  REQUIRE_MESSAGE(k.ok(), k.status().to_string());
  return *k;
}

std::unique_ptr<UcxTransport> transport(std::unique_ptr<UcxContext> context, int rank,
                                        std::vector<std::vector<std::byte>> addresses, std::uint64_t key) {
  auto t = UcxTransport::create(std::move(context), rank, std::move(addresses), key);
  REQUIRE_MESSAGE(t.ok(), t.status().to_string());
  return std::move(t).value();
}

}  // namespace

TEST_CASE("auth: the data-plane tag key is the job key's, new for every ring, and 0 without a key") {
  const std::vector<std::vector<std::uint8_t>> addresses = {{1, 2, 3}, {4, 5}};
  const std::uint64_t k = tag_key("secret", "job", 7, addresses);
  CHECK(k != 0);
  CHECK(tag_key("secret", "job", 7, addresses) == k);  // every node computes the same
  std::set<std::uint64_t> others = {k, tag_key("Secret", "job", 7, addresses), tag_key("secret", "job2", 7, addresses),
                                    tag_key("secret", "job", 8, addresses),
                                    tag_key("secret", "job", 7, {{1, 2, 3}, {4, 6}}),
                                    tag_key("secret", "job", 7, {{1, 2}, {3, 4, 5}})};
  CHECK(others.size() == 6);  // key, job, epoch and each address all count, fields do not run together
  CHECK(tag_key("", "job", 7, addresses) == 0);
}

TEST_CASE("auth: a keyed codec still carries the sender, and its tags differ from unkeyed ones") {
  const std::uint64_t key = 0x9e3779b97f4a7c15ULL;
  for (int size : {1, 2, 3, 8}) {
    CAPTURE(size);
    const UcxTagCodec plain(size), keyed(size, key);
    const std::uint64_t tag = make_tag(99, 3, 4);
    for (int sender = 0; sender < size; ++sender) {
      CHECK(keyed.encode(sender, tag) == (plain.encode(sender, tag) ^ key));
      CHECK(keyed.sender(keyed.encode(sender, tag)) == sender);
    }
  }
}

TEST_CASE("auth: a message from outside a keyed ring never matches the ring's receive") {
  const UcxOptions options = loopback("tcp,self");
  auto a = make_context(options), b = make_context(options), s = make_context(options);
  const std::vector<std::vector<std::byte>> ring = {a->address(), b->address()};
  const std::uint64_t key = 0x5bd1e9955bd1e995ULL;
  auto node0 = transport(std::move(a), 0, ring, key);
  auto node1 = transport(std::move(b), 1, ring, key);
  // The stranger knows node 1's address and poses as node 0. Without the key
  // its tags are an unkeyed ring's; with it (the control case), they match.
  std::uint64_t stranger_key = 0;
  bool stranger_matches = false;
  SUBCASE("without the key: dropped") {}
  SUBCASE("with the key, the receive takes it: the key is what keeps it out") {
    stranger_key = key;
    stranger_matches = true;
  }
  auto stranger = transport(std::move(s), 0, {std::vector<std::byte>(), ring[1]}, stranger_key);

  const auto forged = pattern(4096, 1), real = pattern(4096, 2);
  const std::uint64_t tag = make_tag(5, 0, 0);
  Outcome forged_send;
  stranger->send(1, tag, forged.data(), forged.size(), forged_send.callback());
  REQUIRE(drive({stranger.get(), node1.get()}, [&] { return forged_send.done; }));
  for (int i = 0; i < 200; ++i) node1->progress();  // the forged message reaches node 1 first

  std::vector<std::byte> received(4096);
  Outcome recv, real_send;
  node1->recv(0, tag, received.data(), received.size(), recv.callback());
  node0->send(1, tag, real.data(), real.size(), real_send.callback());
  REQUIRE(drive({node0.get(), node1.get(), stranger.get()}, [&] { return recv.done && real_send.done; }));
  CHECK(recv.status.ok());
  CHECK(received == (stranger_matches ? forged : real));
}

}  // namespace test_service_transport_ucx_tag_key
