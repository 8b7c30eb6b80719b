// Where a daemon runs and what its peers may share with it (locality.h), and
// the offer a node makes for its data plane (ucx_offer.h).
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "service/transport/locality.h"
#include "service/transport/ucx_offer.h"

namespace test_service_transport_locality {

using ringsync::StatusCode;
using namespace ringsync::service::transport;

namespace {

Locality host(std::uint64_t ns, const std::string& boot = "boot-a") {
  Locality l;
  l.boot_id = boot;
  l.hostname = std::string("h").append(std::to_string(ns));
  l.net = l.ipc = l.shm = l.pid = l.user = ns;
  return l;
}

UcxOffer offer(const Locality& where, bool shared = true, bool network = true) {
  UcxOffer o;
  o.where = where;
  o.worker = {1, 2, 3};
  if (network) o.network_worker = {4, 5};
  o.offers_shared_memory = shared;
  return o;
}

}  // namespace

TEST_CASE("locality: this process's is read from /proc, and it shares everything with itself") {
  const Locality here = Locality::here();
  CHECK(!here.boot_id.empty());
  CHECK(here.net != 0);
  CHECK(here.ipc != 0);
  CHECK(here.shm != 0);
  CHECK(here.pid != 0);
  CHECK(here.user != 0);
  CHECK(shared_memory_refusal(here, here).empty());
}

TEST_CASE("locality: read() takes a folder laid out as /proc, and names nothing it cannot read") {
  char dir[] = "/tmp/rs-proc-XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  const std::string base = dir;
  std::filesystem::create_directories(base + "/sys/kernel/random");
  std::ofstream(base + "/sys/kernel/random/boot_id") << "1234-abcd\n";
  const Locality l = Locality::read(base, base + "/no-shm", "box");
  CHECK(l.boot_id == "1234-abcd");
  CHECK(l.hostname == "box");
  CHECK(l.net == 0);  // no ns/ folder
  CHECK(l.shm == 0);
  // What cannot be told matches nothing: shared memory is refused.
  CHECK(shared_memory_refusal(l, l) == "network namespace, IPC namespace, /dev/shm, PID namespace and user namespace");
  // /dev/shm is told apart by its file system: the same one seen twice is one.
  const Locality a = Locality::read(base, "/dev/shm", "a");
  CHECK(a.shm == Locality::read(base, "/dev/shm/.", "a").shm);
  CHECK(a.shm != Locality::read(base, base, "a").shm);
  std::filesystem::remove_all(base);
}

TEST_CASE("locality: shared memory needs one kernel and every namespace it crosses") {
  CHECK(shared_memory_refusal(host(1), host(1)).empty());
  // Two kernels: UCX does not offer shared memory at all, nothing to refuse.
  CHECK(shared_memory_refusal(host(1, "boot-a"), host(2, "boot-b")).empty());
  CHECK(shared_memory_refusal(host(1, ""), host(2, "")).empty());
  Locality other_net = host(1);
  other_net.net = 9;
  CHECK(shared_memory_refusal(host(1), other_net) == "network namespace");
  CHECK(shared_memory_refusal(other_net, host(1)) == "network namespace");
  Locality two = other_net;
  two.ipc = 9;
  CHECK(shared_memory_refusal(host(1), two) == "network namespace and IPC namespace");
  Locality pid = host(1);
  pid.pid = 5;
  CHECK(shared_memory_refusal(host(1), pid) == "PID namespace");
  Locality shm = host(1);
  shm.shm = 5;
  CHECK(shared_memory_refusal(host(1), shm) == "/dev/shm");
  // The hostname alone (a UTS namespace) changes nothing.
  Locality named = host(1);
  named.hostname = "elsewhere";
  CHECK(shared_memory_refusal(host(1), named).empty());
}

TEST_CASE("locality: the network-only transport list keeps everything but shared memory") {
  CHECK(without_shared_memory("") == "^sm");
  CHECK(without_shared_memory("all") == "^sm");
  CHECK(without_shared_memory("tcp,sysv,self") == "tcp,self");
  CHECK(without_shared_memory("rc,ud,sm,self") == "rc,ud,self");
  CHECK(without_shared_memory("^tcp") == "^tcp,sm");
  CHECK(without_shared_memory("^cma") == "^cma,sm");
  CHECK(without_shared_memory("tcp") == "tcp");
  // Nothing that reaches another process is left.
  CHECK(without_shared_memory("sm,self").empty());
  CHECK(without_shared_memory("posix,cma").empty());

  CHECK(may_use_shared_memory(""));
  CHECK(may_use_shared_memory("all"));
  CHECK(may_use_shared_memory("tcp,sysv"));
  CHECK(may_use_shared_memory("^tcp"));
  CHECK_FALSE(may_use_shared_memory("tcp,self"));
  CHECK_FALSE(may_use_shared_memory("^sm"));
  CHECK_FALSE(may_use_shared_memory("^shm,tcp"));
}

TEST_CASE("locality and offer: encoded and decoded whole; anything else is refused") {
  Locality l = host(7);
  l.hostname = "node-a";
  auto back = Locality::decode(l.encode());
  REQUIRE(back.ok());
  CHECK(*back == l);

  UcxOffer o = offer(l);
  auto decoded = UcxOffer::decode(o.encode());
  REQUIRE_MESSAGE(decoded.ok(), decoded.status().to_string());
  CHECK(decoded->where == l);
  CHECK(decoded->worker == o.worker);
  CHECK(decoded->network_worker == o.network_worker);
  CHECK(decoded->offers_shared_memory);

  auto bytes = o.encode();
  for (std::size_t cut : {std::size_t{0}, std::size_t{1}, bytes.size() / 2, bytes.size() - 1}) {
    auto truncated = UcxOffer::decode({bytes.data(), cut});
    CHECK(!truncated.ok());
    CHECK(truncated.status().code() == StatusCode::kProtocolError);
  }
  auto longer = bytes;
  longer.push_back(0);
  CHECK(!UcxOffer::decode(longer).ok());
  auto other_format = bytes;
  other_format[0] = 99;
  CHECK(UcxOffer::decode(other_format).status().message().find("unknown format") != std::string::npos);
  // A bare UCX worker address (what a daemon before this format sent).
  const std::vector<std::uint8_t> bare = {0x80, 0x01, 0x02, 0x03, 0x04};
  CHECK(!UcxOffer::decode(bare).ok());
  UcxOffer no_worker = offer(l);
  no_worker.worker.clear();
  CHECK(!UcxOffer::decode(no_worker.encode()).ok());
}

TEST_CASE("offer: every node's worker is chosen alike, network-only where a node on its kernel is in other namespaces") {
  const std::vector<std::string> names = {"node 0", "node 1", "node 2", "node 3"};
  SUBCASE("one namespace: every node keeps shared memory") {
    auto chosen = choose_workers({offer(host(1)), offer(host(1)), offer(host(1))}, names);
    REQUIRE(chosen.ok());
    for (const auto& c : *chosen) CHECK_FALSE(c.network_only);
  }
  SUBCASE("nodes 0 and 1 in one namespace, node 2 in another of the same kernel, node 3 on another machine") {
    auto chosen = choose_workers({offer(host(1)), offer(host(1)), offer(host(2)), offer(host(3, "boot-b"))}, names);
    REQUIRE(chosen.ok());
    CHECK((*chosen)[0].network_only);
    CHECK((*chosen)[1].network_only);
    CHECK((*chosen)[2].network_only);
    CHECK_FALSE((*chosen)[3].network_only);
    CHECK((*chosen)[0].why == "node 2 (hostname h2) runs on the same kernel as node 0 but does not share its network "
                              "namespace, IPC namespace, /dev/shm, PID namespace and user namespace, which UCX's "
                              "shared memory needs");
    CHECK((*chosen)[2].why.find("node 0 (hostname h1)") == 0);
    CHECK((*chosen)[3].why.empty());
  }
  SUBCASE("a node whose transports have no shared memory keeps its one worker") {
    auto chosen = choose_workers({offer(host(1), false, false), offer(host(2), false, false)}, names);
    REQUIRE(chosen.ok());
    CHECK_FALSE((*chosen)[0].network_only);
    CHECK_FALSE((*chosen)[1].network_only);
  }
  SUBCASE("shared memory only, across namespaces: refused with what to do") {
    auto chosen = choose_workers({offer(host(1), true, false), offer(host(2), true, false)}, names);
    REQUIRE(!chosen.ok());
    CHECK(chosen.status().code() == StatusCode::kInvalidArgument);
    CHECK(chosen.status().message().find("add tcp") != std::string::npos);
    CHECK(chosen.status().message().find("node 1 (hostname h2)") != std::string::npos);
  }
}

}  // namespace test_service_transport_locality
