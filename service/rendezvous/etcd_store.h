// The Store over etcd v3, through its gRPC gateway's JSON API (POST
// /v3/kv/range, /v3/kv/txn, /v3/lease/grant ...) with Boost.Beast. Chosen over
// etcd's gRPC API: nothing to add to the build (gRPC and protobuf code
// generation for a handful of calls), the same HTTP client code the daemon
// already has, and the gateway is on by default in the etcd 3.4 of Debian 12.
// Keys and values travel base64-encoded, as the gateway wants them. Every
// call tries the endpoints in order, each bounded by the request timeout.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "service/rendezvous/http_json.h"
#include "service/rendezvous/store.h"

namespace ringsync::service::rendezvous {

class EtcdStore final : public Store {
 public:
  // url: etcd://HOST:PORT[,HOST:PORT...]; an error names what is wrong.
  static Result<std::unique_ptr<EtcdStore>> open(const std::string& url, std::chrono::nanoseconds request_timeout);

  const std::string& name() const override { return name_; }
  boost::asio::awaitable<Result<Lease>> grant(std::chrono::seconds ttl) override;
  boost::asio::awaitable<Status> keep_alive(Lease lease) override;
  boost::asio::awaitable<Status> revoke(Lease lease) override;
  boost::asio::awaitable<Result<std::optional<Entry>>> create(const std::string& key, const std::string& value,
                                                              Lease lease) override;
  boost::asio::awaitable<Result<bool>> compare_and_swap(const std::string& key, std::int64_t revision,
                                                        const std::string& value, Lease lease) override;
  boost::asio::awaitable<Result<std::optional<Entry>>> get(const std::string& key) override;
  boost::asio::awaitable<Result<std::vector<Entry>>> list(const std::string& prefix) override;

 private:
  EtcdStore(std::string name, std::vector<HttpEndpoint> endpoints, std::chrono::nanoseconds timeout)
      : name_(std::move(name)), endpoints_(std::move(endpoints)), timeout_(timeout) {}
  boost::asio::awaitable<Result<nlohmann::json>> call(const std::string& path, const nlohmann::json& body);

  std::string name_;
  std::vector<HttpEndpoint> endpoints_;
  std::chrono::nanoseconds timeout_;
};

// etcd://HOST:PORT[,HOST:PORT] as endpoints; the default port is 2379.
Result<std::vector<HttpEndpoint>> parse_etcd_url(const std::string& url);

}  // namespace ringsync::service::rendezvous
