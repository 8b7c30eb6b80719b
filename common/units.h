// Human-friendly sizes, durations, booleans and HOST:PORT addresses: the value
// forms accepted by flags, environment variables and config files.
//
// Sizes are byte counts with an optional binary multiple. K, KB and KiB all mean
// 1024 (M = 1024^2, G = 1024^3, T = 1024^4, P = 1024^5); the letters are
// case-insensitive and a trailing "B" alone means bytes: "4096", "64K", "64MiB",
// "1.5GiB". A fraction is allowed when the result is a whole number of bytes.
//
// Durations are one or more number+unit pairs: ns, us, ms, s, m (or min), h, as in
// "250us", "500ms", "30s", "2m", "1h30m". A bare number means seconds ("30" = 30s).
// Fractions are allowed ("1.5s") when the result is a whole number of nanoseconds.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace ringsync::units {

// The expected forms, for error messages that tell the user what to type.
inline constexpr std::string_view kBytesForm = "a size such as 4096, 64K, 64MiB or 1.5GiB (binary multiples)";
inline constexpr std::string_view kDurationForm =
    "a duration such as 250us, 500ms, 30s, 2m, 1h30m (a bare number means seconds)";
inline constexpr std::string_view kBoolForm = "one of true/false, 1/0, yes/no, on/off";
inline constexpr std::string_view kIntForm = "a whole number such as 0, 8 or -1";
inline constexpr std::string_view kAddressForm =
    "HOST:PORT with a port 0-65535, IPv6 in brackets ([::1]:9400), or off";

// Each parser returns InvalidArgument with a short reason ("unknown unit 'x'") on
// bad input; callers add which setting the value came from.
Result<std::uint64_t> parse_bytes(std::string_view text);
inline constexpr std::string_view kRateForm =
    "a link rate in bits per second such as 25Gbit, 100Gbit or 400Mbit (decimal multiples), or "
    "bytes per second as a size such as 12.5GB";
// Bytes per second from "100Gbit" (decimal: 100e9 / 8) or a size ("12GiB" per second).
Result<double> parse_rate(std::string_view text);
Result<std::chrono::nanoseconds> parse_duration(std::string_view text);
Result<bool> parse_bool(std::string_view text);
Result<std::int64_t> parse_int(std::string_view text);

struct Address {
  std::string host;  // without brackets: "::1", "127.0.0.1", "node-3"
  std::uint16_t port = 0;
  // "host:port", with brackets around an IPv6 host.
  std::string to_string() const;
};

// HOST:PORT, "[IPV6]:PORT". "off" and "" mean "no address" (a disabled endpoint)
// and give std::nullopt.
Result<std::optional<Address>> parse_address(std::string_view text);

// Shortest exact rendering: 65536 -> "64KiB", 1536 -> "1536", 0 -> "0".
std::string format_bytes(std::uint64_t bytes);
// Largest exact unit: 300s -> "5m", 1500ms -> "1500ms", 0 -> "0s".
std::string format_duration(std::chrono::nanoseconds d);
// For messages about waits: 1.5s -> "1.5 s", 60s -> "60.0 s" (one decimal).
std::string format_seconds(std::chrono::nanoseconds d);

}  // namespace ringsync::units
