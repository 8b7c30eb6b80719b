#include "service/rendezvous/etcd_store.h"

#include "common/hostfile.h"
#include "service/rendezvous/etcd_json.h"

namespace ringsync::service::rendezvous {

namespace asio = boost::asio;
using nlohmann::json;

namespace {

// (Named strings: GCC 12 miscompiles string literals in co_await expressions.)
const std::string kGrant = "/v3/lease/grant";
const std::string kKeepAlive = "/v3/lease/keepalive";
const std::string kRevoke = "/v3/lease/revoke";
const std::string kTxn = "/v3/kv/txn";
const std::string kRange = "/v3/kv/range";

Result<Entry> entry_of(const json& kv) {
  auto key = unbase64(kv.value("key", ""));
  if (!key.ok()) return key.status();
  auto value = unbase64(kv.value("value", ""));
  if (!value.ok()) return value.status();
  return Entry{*key, *value, json_integer(kv, "mod_revision")};
}

json put(const std::string& key, const std::string& value, Store::Lease lease) {
  json p = {{"key", base64(key)}, {"value", base64(value)}};
  if (lease != 0) p["lease"] = std::to_string(lease);
  return p;
}

}  // namespace

Result<std::vector<HttpEndpoint>> parse_etcd_url(const std::string& url) {
  const std::string scheme = "etcd://";
  if (url.rfind(scheme, 0) != 0)
    return Status::InvalidArgument("rendezvous '" + url + "' is not etcd://HOST:PORT[,HOST:PORT]");
  auto nodes = parse_node_list(url.substr(scheme.size()), 1);
  if (!nodes.ok()) return Status::InvalidArgument("rendezvous '" + url + "': " + nodes.status().message());
  std::vector<HttpEndpoint> endpoints;
  for (const auto& n : *nodes) endpoints.push_back({n.host, n.port ? n.port : std::uint16_t{2379}});
  return endpoints;
}

Result<std::unique_ptr<EtcdStore>> EtcdStore::open(const std::string& url, std::chrono::nanoseconds timeout) {
  auto endpoints = parse_etcd_url(url);
  if (!endpoints.ok()) return endpoints.status();
  return std::unique_ptr<EtcdStore>(new EtcdStore(url, std::move(endpoints).value(), timeout));
}

asio::awaitable<Result<json>> EtcdStore::call(const std::string& path, const json& body) {
  auto answer = co_await post_json(endpoints_, path, body, timeout_);
  if (!answer.ok())
    co_return Status(answer.status().code(), "the rendezvous store " + name_ + " failed: " + answer.status().message() +
                                                 "; is etcd (or the ringsyncd that serves the rendezvous, --serve-rendezvous) running and reachable from this node?");
  co_return answer;
}

asio::awaitable<Result<Store::Lease>> EtcdStore::grant(std::chrono::seconds ttl) {
  const json body = {{"TTL", std::to_string(ttl.count())}};
  auto answer = co_await call(kGrant, body);
  if (!answer.ok()) co_return answer.status();
  const Lease id = json_integer(*answer, "ID");
  if (id == 0) co_return Status::ProtocolError(name_ + " granted no lease: " + answer->dump());
  co_return id;
}

asio::awaitable<Status> EtcdStore::keep_alive(Lease lease) {
  const json body = {{"ID", std::to_string(lease)}};
  auto answer = co_await call(kKeepAlive, body);
  if (!answer.ok()) co_return answer.status();
  const json result = answer->value("result", json::object());
  if (json_integer(result, "TTL") <= 0)
    co_return Status::PeerLost("the lease " + std::to_string(lease) + " in " + name_ + " has expired");
  co_return Status::Ok();
}

asio::awaitable<Status> EtcdStore::revoke(Lease lease) {
  const json body = {{"ID", std::to_string(lease)}};
  auto answer = co_await call(kRevoke, body);
  co_return answer.ok() ? Status::Ok() : answer.status();
}

asio::awaitable<Result<std::optional<Entry>>> EtcdStore::create(const std::string& key, const std::string& value,
                                                                 Lease lease) {
  json txn = {{"compare", json::array({{{"key", base64(key)},
                                        {"target", "CREATE"},
                                        {"result", "EQUAL"},
                                        {"create_revision", "0"}}})},
              {"success", json::array({{{"request_put", put(key, value, lease)}}})},
              {"failure", json::array({{{"request_range", {{"key", base64(key)}}}}})}};
  auto answer = co_await call(kTxn, txn);
  if (!answer.ok()) co_return answer.status();
  if (answer->value("succeeded", false)) co_return std::optional<Entry>();
  for (const auto& response : answer->value("responses", json::array())) {
    const json range = response.value("response_range", json::object());
    for (const auto& kv : range.value("kvs", json::array())) {
      auto existing = entry_of(kv);
      if (!existing.ok()) co_return existing.status();
      co_return std::optional<Entry>(std::move(existing).value());
    }
  }
  // Deleted between the compare and the range: try again.
  co_return co_await create(key, value, lease);
}

asio::awaitable<Result<bool>> EtcdStore::compare_and_swap(const std::string& key, std::int64_t revision,
                                                          const std::string& value, Lease lease) {
  json txn = {{"compare", json::array({{{"key", base64(key)},
                                        {"target", "MOD"},
                                        {"result", "EQUAL"},
                                        {"mod_revision", std::to_string(revision)}}})},
              {"success", json::array({{{"request_put", put(key, value, lease)}}})}};
  auto answer = co_await call(kTxn, txn);
  if (!answer.ok()) co_return answer.status();
  co_return answer->value("succeeded", false);
}

asio::awaitable<Result<std::optional<Entry>>> EtcdStore::get(const std::string& key) {
  const json body = {{"key", base64(key)}};
  auto answer = co_await call(kRange, body);
  if (!answer.ok()) co_return answer.status();
  for (const auto& kv : answer->value("kvs", json::array())) {
    auto entry = entry_of(kv);
    if (!entry.ok()) co_return entry.status();
    co_return std::optional<Entry>(std::move(entry).value());
  }
  co_return std::optional<Entry>();
}

asio::awaitable<Result<std::vector<Entry>>> EtcdStore::list(const std::string& prefix) {
  const json body = {{"key", base64(prefix)}, {"range_end", base64(prefix_end(prefix))}};
  auto answer = co_await call(kRange, body);
  if (!answer.ok()) co_return answer.status();
  std::vector<Entry> entries;
  for (const auto& kv : answer->value("kvs", json::array())) {
    auto entry = entry_of(kv);
    if (!entry.ok()) co_return entry.status();
    entries.push_back(std::move(entry).value());
  }
  co_return entries;
}

}  // namespace ringsync::service::rendezvous
