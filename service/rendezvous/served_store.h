// The rendezvous store a ringsyncd serves itself (store_server.h), without
// the network: the part of etcd's v3 JSON API the daemons use, answered from
// this process's memory with etcd's semantics. A request in, an answer out:
//
//   /v3/lease/grant      {"TTL"}                 -> {"ID", "TTL"}
//   /v3/lease/keepalive  {"ID"}                  -> {"result": {"ID", "TTL"}}   (TTL "0": expired)
//   /v3/lease/revoke     {"ID"}                  -> {}                          (its keys go)
//   /v3/kv/range         {"key", "range_end"?}   -> {"kvs": [...], "count"}
//   /v3/kv/txn           one compare of a key's create or mod revision (EQUAL),
//                        request_put / request_range in success and failure
//                                                -> {"succeeded", "responses"}
//
// Leases expire `TTL` seconds after their grant or last keep-alive, checked
// at every request (nothing can see a key between two requests). Anything
// else is refused with a message that says what is supported.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"

namespace ringsync::service::rendezvous {

class ServedStore {
 public:
  using Clock = std::chrono::steady_clock;

  // Limits, so that no client can make the daemon hold unbounded memory.
  static constexpr std::size_t kMaxKeys = 100000;
  static constexpr std::size_t kMaxLeases = 100000;
  static constexpr std::size_t kMaxValueBytes = 1 << 20;

  Result<nlohmann::json> handle(const std::string& path, const nlohmann::json& body, Clock::time_point now);

  std::size_t keys() const { return entries_.size(); }
  std::size_t leases() const { return leases_.size(); }

 private:
  struct Value {
    std::string value;
    std::int64_t create_revision = 0;
    std::int64_t mod_revision = 0;
    std::int64_t version = 0;
    std::int64_t lease = 0;
  };
  struct LeaseState {
    std::chrono::seconds ttl{0};
    Clock::time_point expires;
  };

  void expire(Clock::time_point now);
  void drop_lease(std::int64_t id);
  nlohmann::json header() const;
  nlohmann::json kv_json(const std::string& key, const Value& v) const;
  Result<nlohmann::json> grant(const nlohmann::json& body, Clock::time_point now);
  Result<nlohmann::json> keep_alive(const nlohmann::json& body, Clock::time_point now);
  Result<nlohmann::json> revoke(const nlohmann::json& body);
  Result<nlohmann::json> range(const nlohmann::json& body) const;
  Result<nlohmann::json> put(const nlohmann::json& body);
  Result<nlohmann::json> txn(const nlohmann::json& body);

  std::map<std::string, Value> entries_;
  std::map<std::int64_t, LeaseState> leases_;
  std::int64_t revision_ = 1;  // etcd starts at 1
  std::int64_t next_lease_ = 0x5eed0001;
};

}  // namespace ringsync::service::rendezvous
