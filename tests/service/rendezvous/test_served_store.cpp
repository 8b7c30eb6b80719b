// The rendezvous store a ringsyncd serves itself (rendezvous/served_store.h):
// etcd's semantics for what ringsync uses, with lease expiry driven by a clock
// the test sets; then the project's own etcd client (EtcdStore) against it
// over a real loopback socket (the daemon's HTTP server), as the daemons of a
// job use it.
#include <doctest/doctest.h>

#include <utility>  // Asio 1.18 needs std::exchange declared first

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <nlohmann/json.hpp>

#include "service/observe/metrics_http.h"
#include "service/rendezvous/etcd_json.h"
#include "service/rendezvous/etcd_store.h"
#include "service/rendezvous/http_json.h"
#include "service/rendezvous/served_store.h"

namespace test_service_rendezvous_served_store {

using namespace ringsync;
using namespace ringsync::service::rendezvous;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

json put_op(const std::string& key, const std::string& value, const std::string& lease = "") {
  json p = {{"key", base64(key)}, {"value", base64(value)}};
  if (!lease.empty()) p["lease"] = lease;
  return {{"request_put", p}};
}

json create_txn(const std::string& key, const std::string& value, const std::string& lease = "") {
  return {{"compare", {{{"key", base64(key)}, {"target", "CREATE"}, {"result", "EQUAL"}, {"create_revision", "0"}}}},
          {"success", {put_op(key, value, lease)}},
          {"failure", {{{"request_range", {{"key", base64(key)}}}}}}};
}

json ok(Result<json> r) {
  REQUIRE_MESSAGE(r.ok(), r.status().message());
  return *r;
}

std::vector<std::string> keys(const json& range) {
  std::vector<std::string> out;
  for (const auto& kv : range.value("kvs", json::array())) out.push_back(*unbase64(kv["key"].get<std::string>()));
  return out;
}

}  // namespace

TEST_CASE("served store: create-if-absent, compare-and-swap on the mod revision, prefix ranges") {
  ServedStore store;
  const auto t = Clock::now();
  CHECK(ok(store.handle("/v3/kv/txn", create_txn("/j/roster", "r1"), t)).value("succeeded", false));
  // A second create fails and answers with what is there.
  const json again = ok(store.handle("/v3/kv/txn", create_txn("/j/roster", "r2"), t));
  CHECK_FALSE(again.value("succeeded", false));
  const json there = again["responses"][0]["response_range"]["kvs"][0];
  CHECK(*unbase64(there["value"].get<std::string>()) == "r1");
  const std::string revision = there["mod_revision"];
  const auto cas = [&](const std::string& rev, const std::string& value) {
    return ok(store.handle("/v3/kv/txn",
                           {{"compare", {{{"key", base64("/j/roster")}, {"target", "MOD"}, {"result", "EQUAL"},
                                          {"mod_revision", rev}}}},
                            {"success", {put_op("/j/roster", value)}}},
                           t))
        .value("succeeded", false);
  };
  CHECK_FALSE(cas("1", "stale"));
  CHECK(cas(revision, "r2"));
  CHECK_FALSE(cas(revision, "r3"));  // the revision moved on
  for (const char* k : {"/j/members/b", "/j/members/a", "/k/other"})
    ok(store.handle("/v3/kv/txn", create_txn(k, "x"), t));
  const json members = ok(store.handle(
      "/v3/kv/range", {{"key", base64("/j/members/")}, {"range_end", base64(prefix_end("/j/members/"))}}, t));
  CHECK(keys(members) == std::vector<std::string>{"/j/members/a", "/j/members/b"});
  CHECK(members["count"] == "2");
  CHECK(keys(ok(store.handle("/v3/kv/range", {{"key", base64("/nothing")}}, t))).empty());
}

TEST_CASE("served store: a lease's keys go when it is not kept alive, or revoked") {
  ServedStore store;
  const auto t = Clock::now();
  const json lease = ok(store.handle("/v3/lease/grant", {{"TTL", "2"}}, t));
  const std::string id = lease["ID"];
  CHECK(lease["TTL"] == "2");
  ok(store.handle("/v3/kv/txn", create_txn("/j/members/a", "a", id), t));
  ok(store.handle("/v3/kv/txn", create_txn("/j/roster", "stays"), t));
  // Kept alive at 1.5 s: still there at 3 s.
  CHECK(ok(store.handle("/v3/lease/keepalive", {{"ID", id}}, t + std::chrono::milliseconds(1500)))["result"]["TTL"] ==
        "2");
  CHECK(keys(ok(store.handle("/v3/kv/range", {{"key", base64("/j/members/a")}}, t + std::chrono::seconds(3))))
            .size() == 1);
  // Not kept alive any more: gone 2 s after the last keep-alive.
  const auto later = t + std::chrono::milliseconds(3600);
  CHECK(keys(ok(store.handle("/v3/kv/range", {{"key", base64("/j/members/a")}}, later))).empty());
  CHECK_FALSE(ok(store.handle("/v3/lease/keepalive", {{"ID", id}}, later))["result"].contains("TTL"));
  CHECK(keys(ok(store.handle("/v3/kv/range", {{"key", base64("/j/roster")}}, later))).size() == 1);
  // Revoked: its keys go at once.
  const std::string other = ok(store.handle("/v3/lease/grant", {{"TTL", "60"}}, later))["ID"];
  ok(store.handle("/v3/kv/txn", create_txn("/j/members/b", "b", other), later));
  ok(store.handle("/v3/lease/revoke", {{"ID", other}}, later));
  CHECK(keys(ok(store.handle("/v3/kv/range", {{"key", base64("/j/members/b")}}, later))).empty());
  CHECK(store.leases() == 0);
}

TEST_CASE("served store: what it does not serve is refused with a message that says so") {
  ServedStore store;
  const auto t = Clock::now();
  const auto refused = [&](const std::string& path, const json& body, const std::string& says) {
    auto r = store.handle(path, body, t);
    REQUIRE_FALSE(r.ok());
    CHECK_MESSAGE(r.status().message().find(says) != std::string::npos, r.status().message());
  };
  refused("/v3/watch", json::object(), "use a real etcd");
  refused("/v3/kv/deleterange", {{"key", base64("a")}}, "no such endpoint");
  refused("/v3/kv/range", json::object(), "no base64 'key'");
  refused("/v3/kv/range", {{"key", "not base64!"}}, "not base64");
  refused("/v3/kv/range", json::array(), "not a JSON object");
  refused("/v3/lease/grant", {{"TTL", "0"}}, "TTL");
  refused("/v3/lease/grant", {{"TTL", "ten"}}, "TTL");
  refused("/v3/lease/revoke", {{"ID", "12345"}}, "lease not found");
  refused("/v3/kv/txn", {{"success", {put_op("k", "v", "777")}}}, "lease not found");
  refused("/v3/kv/txn", {{"success", {put_op("k", std::string(ServedStore::kMaxValueBytes + 1, 'x'))}}}, "1 MiB");
  json two = create_txn("a", "b");
  two["compare"].push_back(two["compare"][0]);
  refused("/v3/kv/txn", two, "more than one compare");
  json version = create_txn("a", "b");
  version["compare"][0]["target"] = "VERSION";
  refused("/v3/kv/txn", version, "VERSION");
  json greater = create_txn("a", "b");
  greater["compare"][0]["result"] = "GREATER";
  refused("/v3/kv/txn", greater, "EQUAL");
  // Fields of the wrong type are refused, not thrown (found by fuzz_served_store).
  json object_result = create_txn("a", "b");
  object_result["compare"][0]["result"] = {{"key", base64("a")}};
  refused("/v3/kv/txn", object_result, "'result' is not a string");
  json number_target = create_txn("a", "b");
  number_target["compare"][0]["target"] = 3;
  refused("/v3/kv/txn", number_target, "'target' is not a string");
  json number_value = create_txn("a", "b");
  number_value["success"][0]["request_put"]["value"] = 1;
  refused("/v3/kv/txn", number_value, "'value' is not a string");
  CHECK(store.keys() == 0);  // nothing was written by a refused request
}

TEST_CASE("served store: the etcd client the daemons use works against it over HTTP") {
  boost::asio::io_context io;
  ServedStore served;
  service::observe::MetricsServerOptions options;
  options.flag = "--serve-rendezvous";
  options.body_limit = 2 * ServedStore::kMaxValueBytes;
  options.post = [&](std::string_view path, const std::string& body) -> Result<std::string> {
    const json request = json::parse(body, nullptr, false);
    if (request.is_discarded()) return Status::InvalidArgument("the request body is not JSON");
    auto answer = served.handle(std::string(path), request, Clock::now());
    if (!answer.ok()) return answer.status();
    return answer->dump();
  };
  auto server = service::observe::MetricsServer::start(io, "127.0.0.1:0", [] { return std::string("# none\n"); }, options);
  REQUIRE(server.ok());
  const std::string address = "127.0.0.1:" + std::to_string((*server)->endpoint().port());
  auto opened = EtcdStore::open("etcd://" + address, std::chrono::seconds(5));
  REQUIRE(opened.ok());
  std::unique_ptr<EtcdStore> store = std::move(opened).value();

  struct Seen {
    bool granted = false, created = false, second_create_saw_first = false, swapped = false, stale_swap = true;
    std::vector<std::string> listed;
    bool kept_alive = false, revoked = false, gone_after_revoke = false;
    std::string refused;
  };
  Seen seen;
  auto done = boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        // (Named strings: GCC 12 miscompiles temporaries in co_await expressions.)
        const std::string a = "/j/members/a", b = "/j/members/b", prefix = "/j/members/";
        const std::string va = "A", vb = "B", other = "other", va2 = "A2", va3 = "A3";
        auto lease = co_await store->grant(std::chrono::seconds(5));
        seen.granted = lease.ok();
        if (!lease.ok()) co_return;
        auto created = co_await store->create(a, va, *lease);
        seen.created = created.ok() && !*created;
        auto again = co_await store->create(a, other, 0);
        seen.second_create_saw_first = again.ok() && *again && (*again)->value == "A";
        co_await store->create(b, vb, *lease);
        auto entry = co_await store->get(a);
        if (entry.ok() && *entry) {
          auto swapped = co_await store->compare_and_swap(a, (*entry)->mod_revision, va2, *lease);
          seen.swapped = swapped.ok() && *swapped;
          auto stale = co_await store->compare_and_swap(a, (*entry)->mod_revision, va3, *lease);
          seen.stale_swap = !stale.ok() || *stale;
        }
        auto listed = co_await store->list(prefix);
        if (listed.ok())
          for (const auto& e : *listed) seen.listed.push_back(e.key + "=" + e.value);
        seen.kept_alive = (co_await store->keep_alive(*lease)).ok();
        seen.revoked = (co_await store->revoke(*lease)).ok();
        auto after = co_await store->list(prefix);
        seen.gone_after_revoke = after.ok() && after->empty();
        // A request it does not serve: the server's own message comes back.
        const std::vector<HttpEndpoint> endpoints = {HttpEndpoint{"127.0.0.1", (*server)->endpoint().port()}};
        const std::string path = "/v3/watch";
        const json empty = json::object();
        auto watch = co_await post_json(endpoints, path, empty, std::chrono::seconds(5));
        seen.refused = watch.ok() ? "" : watch.status().message();
        (*server)->stop();
      },
      boost::asio::use_future);
  io.run();
  done.get();
  CHECK(seen.granted);
  CHECK(seen.created);
  CHECK(seen.second_create_saw_first);
  CHECK(seen.swapped);
  CHECK_FALSE(seen.stale_swap);
  CHECK(seen.listed == std::vector<std::string>{"/j/members/a=A2", "/j/members/b=B"});
  CHECK(seen.kept_alive);
  CHECK(seen.revoked);
  CHECK(seen.gone_after_revoke);
  CHECK_MESSAGE(seen.refused.find("use a real etcd") != std::string::npos, seen.refused);
}

}  // namespace test_service_rendezvous_served_store
