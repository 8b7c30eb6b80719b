// The forms of etcd's v3 JSON gateway that both ends here use: the client
// (etcd_store.h) and the store a ringsyncd can serve itself (store_server.h).
// Keys and values travel as base64, 64-bit integers as strings.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"

namespace ringsync::service::rendezvous {

std::string base64(const std::string& in);
Result<std::string> unbase64(const std::string& in);
// A 64-bit integer field written as a string (or a number); 0 when absent or not a number.
std::int64_t json_integer(const nlohmann::json& j, const char* field);
// The end of etcd's range for every key that starts with `prefix`.
std::string prefix_end(std::string prefix);

}  // namespace ringsync::service::rendezvous
