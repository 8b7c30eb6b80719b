#include "service/rendezvous/served_store.h"

#include <vector>

#include "service/rendezvous/etcd_json.h"

namespace ringsync::service::rendezvous {

using nlohmann::json;

namespace {

Status unsupported(const std::string& what) {
  return Status::InvalidArgument(what + " (this ringsyncd serves only what ringsync's rendezvous uses of etcd's v3 "
                                        "API: lease grant/keepalive/revoke, kv range, and txn with one compare of a "
                                        "key's create or mod revision; use a real etcd for more)");
}

Result<std::string> key_of(const json& body, const char* field = "key") {
  if (!body.is_object() || !body.contains(field) || !body[field].is_string())
    return Status::InvalidArgument(std::string("the request has no base64 '") + field + "'");
  return unbase64(body[field].get<std::string>());
}

// body[field] (body is an object), or `fallback` when it is absent; a field of
// another type is an error (json::value() would throw).
Result<std::string> text_or(const json& body, const char* field, const char* fallback) {
  if (!body.contains(field)) return std::string(fallback);
  if (!body[field].is_string()) return Status::InvalidArgument(std::string("the request's '") + field + "' is not a string");
  return body[field].get<std::string>();
}

}  // namespace

void ServedStore::drop_lease(std::int64_t id) {
  if (leases_.erase(id) == 0) return;
  bool deleted = false;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second.lease == id) {
      it = entries_.erase(it);
      deleted = true;
    } else {
      ++it;
    }
  }
  if (deleted) ++revision_;
}

void ServedStore::expire(Clock::time_point now) {
  std::vector<std::int64_t> gone;
  for (const auto& [id, lease] : leases_)
    if (lease.expires <= now) gone.push_back(id);
  for (auto id : gone) drop_lease(id);
}

json ServedStore::header() const { return {{"revision", std::to_string(revision_)}}; }

json ServedStore::kv_json(const std::string& key, const Value& v) const {
  json kv = {{"key", base64(key)},
             {"value", base64(v.value)},
             {"create_revision", std::to_string(v.create_revision)},
             {"mod_revision", std::to_string(v.mod_revision)},
             {"version", std::to_string(v.version)}};
  if (v.lease) kv["lease"] = std::to_string(v.lease);
  return kv;
}

Result<json> ServedStore::handle(const std::string& path, const json& body, Clock::time_point now) {
  if (!body.is_object()) return Status::InvalidArgument("the request body is not a JSON object");
  expire(now);
  if (path == "/v3/lease/grant") return grant(body, now);
  if (path == "/v3/lease/keepalive") return keep_alive(body, now);
  if (path == "/v3/lease/revoke") return revoke(body);
  if (path == "/v3/kv/range") return range(body);
  if (path == "/v3/kv/txn") return txn(body);
  return unsupported("no such endpoint: " + path);
}

Result<json> ServedStore::grant(const json& body, Clock::time_point now) {
  const std::int64_t ttl = json_integer(body, "TTL");
  if (ttl <= 0 || ttl > 24 * 3600) return Status::InvalidArgument("a lease's TTL must be 1 s to 1 day");
  if (leases_.size() >= kMaxLeases) return Status::OutOfMemory("too many leases in this store");
  const std::int64_t id = next_lease_++;
  leases_[id] = LeaseState{std::chrono::seconds(ttl), now + std::chrono::seconds(ttl)};
  return json{{"header", header()}, {"ID", std::to_string(id)}, {"TTL", std::to_string(ttl)}};
}

Result<json> ServedStore::keep_alive(const json& body, Clock::time_point now) {
  const std::int64_t id = json_integer(body, "ID");
  json result = {{"header", header()}, {"ID", std::to_string(id)}};
  auto it = leases_.find(id);
  if (it != leases_.end()) {
    it->second.expires = now + it->second.ttl;
    result["TTL"] = std::to_string(it->second.ttl.count());
  }  // expired or unknown: no TTL, as etcd answers
  return json{{"result", result}};
}

Result<json> ServedStore::revoke(const json& body) {
  const std::int64_t id = json_integer(body, "ID");
  if (!leases_.count(id)) return Status::InvalidArgument("requested lease not found");
  drop_lease(id);
  return json{{"header", header()}};
}

Result<json> ServedStore::range(const json& body) const {
  auto key = key_of(body);
  if (!key.ok()) return key.status();
  json kvs = json::array();
  if (body.contains("range_end")) {
    auto end = key_of(body, "range_end");
    if (!end.ok()) return end.status();
    const bool to_the_end = *end == std::string(1, '\0');
    for (auto it = entries_.lower_bound(*key); it != entries_.end() && (to_the_end || it->first < *end); ++it)
      kvs.push_back(kv_json(it->first, it->second));
  } else if (auto it = entries_.find(*key); it != entries_.end()) {
    kvs.push_back(kv_json(it->first, it->second));
  }
  json out = {{"header", header()}, {"count", std::to_string(kvs.size())}};
  if (!kvs.empty()) out["kvs"] = std::move(kvs);
  return out;
}

Result<json> ServedStore::put(const json& body) {
  auto key = key_of(body);
  if (!key.ok()) return key.status();
  auto text = text_or(body, "value", "");
  if (!text.ok()) return text.status();
  auto value = unbase64(*text);
  if (!value.ok()) return value.status();
  if (value->size() > kMaxValueBytes) return Status::InvalidArgument("a value larger than 1 MiB");
  const std::int64_t lease = json_integer(body, "lease");
  if (lease != 0 && !leases_.count(lease)) return Status::InvalidArgument("requested lease not found");
  auto it = entries_.find(*key);
  if (it == entries_.end() && entries_.size() >= kMaxKeys) return Status::OutOfMemory("too many keys in this store");
  ++revision_;
  if (it == entries_.end()) {
    entries_[*key] = Value{std::move(value).value(), revision_, revision_, 1, lease};
  } else {
    it->second.value = std::move(value).value();
    it->second.mod_revision = revision_;
    ++it->second.version;
    it->second.lease = lease;
  }
  return json{{"header", header()}};
}

Result<json> ServedStore::txn(const json& body) {
  const json compares = body.value("compare", json::array());
  if (!compares.is_array() || compares.size() > 1) return unsupported("a txn with more than one compare");
  bool succeeded = true;
  if (compares.size() == 1) {
    const json& c = compares[0];
    auto key = key_of(c);
    if (!key.ok()) return key.status();
    auto result = text_or(c, "result", "EQUAL");
    if (!result.ok()) return result.status();
    if (*result != "EQUAL" || c.contains("range_end")) return unsupported("a compare other than EQUAL on one key");
    auto target_text = text_or(c, "target", "VERSION");
    if (!target_text.ok()) return target_text.status();
    const std::string& target = *target_text;
    const auto it = entries_.find(*key);
    std::int64_t actual = 0, wanted = 0;
    if (target == "CREATE") {
      actual = it == entries_.end() ? 0 : it->second.create_revision;
      wanted = json_integer(c, "create_revision");
    } else if (target == "MOD") {
      actual = it == entries_.end() ? 0 : it->second.mod_revision;
      wanted = json_integer(c, "mod_revision");
    } else {
      return unsupported("a compare of the " + target + " of a key");
    }
    succeeded = actual == wanted;
  }
  json responses = json::array();
  for (const auto& op : body.value(succeeded ? "success" : "failure", json::array())) {
    if (op.contains("request_put")) {
      auto done = put(op["request_put"]);
      if (!done.ok()) return done.status();
      responses.push_back({{"response_put", *done}});
    } else if (op.contains("request_range")) {
      auto done = range(op["request_range"]);
      if (!done.ok()) return done.status();
      responses.push_back({{"response_range", *done}});
    } else {
      return unsupported("a txn operation other than request_put or request_range");
    }
  }
  json out = {{"header", header()}, {"responses", std::move(responses)}};
  if (succeeded) out["succeeded"] = true;
  return out;
}

}  // namespace ringsync::service::rendezvous
