#include <doctest/doctest.h>

#include "common/units.h"

namespace test_common_units {

using namespace std::chrono_literals;
using ringsync::units::Address;
using ringsync::units::format_bytes;
using ringsync::units::format_duration;
using ringsync::units::parse_address;
using ringsync::units::parse_bool;
using ringsync::units::parse_bytes;
using ringsync::units::parse_duration;
using ringsync::units::parse_int;
using ringsync::units::parse_rate;

namespace {

constexpr std::uint64_t KiB = 1024;
constexpr std::uint64_t MiB = KiB * KiB;
constexpr std::uint64_t GiB = KiB * MiB;

std::string bytes_error(std::string_view text) { return parse_bytes(text).status().message(); }
std::string duration_error(std::string_view text) { return parse_duration(text).status().message(); }
std::string address_error(std::string_view text) { return parse_address(text).status().message(); }

}  // namespace

TEST_CASE("sizes use binary multiples with or without B / iB") {
  CHECK(parse_bytes("4096").value() == 4096);
  CHECK(parse_bytes("0").value() == 0);
  CHECK(parse_bytes("64K").value() == 64 * KiB);
  CHECK(parse_bytes("64KB").value() == 64 * KiB);
  CHECK(parse_bytes("64KiB").value() == 64 * KiB);
  CHECK(parse_bytes("64M").value() == 64 * MiB);
  CHECK(parse_bytes("64MiB").value() == 64 * MiB);
  CHECK(parse_bytes("64mib").value() == 64 * MiB);
  CHECK(parse_bytes("1G").value() == GiB);
  CHECK(parse_bytes("1.5GiB").value() == GiB + GiB / 2);
  CHECK(parse_bytes("2T").value() == 2 * 1024 * GiB);
  CHECK(parse_bytes("1P").value() == 1024 * 1024 * GiB);
  CHECK(parse_bytes("512B").value() == 512);
  CHECK(parse_bytes(" 8 MiB ").value() == 8 * MiB);
  CHECK(parse_bytes("0.5K").value() == 512);
  CHECK(parse_bytes("18446744073709551615").value() == UINT64_MAX);
}

TEST_CASE("bad sizes say what is wrong") {
  CHECK(bytes_error("") == "empty value");
  CHECK(bytes_error("64X").find("unknown size unit 'X'") != std::string::npos);
  CHECK(bytes_error("MiB") == "expected a number");
  CHECK(bytes_error("-1") == "negative values are not allowed");
  CHECK(bytes_error("1.3") == "not a whole number of bytes");
  CHECK(bytes_error("0.1K") == "not a whole number of bytes");
  CHECK(bytes_error("16EiB").find("unknown size unit 'EiB'") != std::string::npos);
  CHECK(bytes_error("18446744073709551616") == "value is too large");
  CHECK(bytes_error("20000000P") == "value is too large");
  CHECK(bytes_error("1.2.3M").find("unknown size unit '.3M'") != std::string::npos);
}

TEST_CASE("link rates are bits per second with decimal multiples, or a size per second") {
  CHECK(*parse_rate("100Gbit") == doctest::Approx(12.5e9));
  CHECK(*parse_rate("25gbit") == doctest::Approx(3.125e9));
  CHECK(*parse_rate("1.5Mbit") == doctest::Approx(187500.0));
  CHECK(*parse_rate("12GiB") == doctest::Approx(12.0 * (1ull << 30)));
  for (const char* bad : {"", "fast", "Gbit", "10 Xbit", "-1Gbit", "3Gbitx"}) {
    auto r = parse_rate(bad);
    CHECK_MESSAGE(!r.ok(), bad);
  }
  CHECK(parse_rate("fast").status().message().find("25Gbit") != std::string::npos);
}

TEST_CASE("durations take units, combine, and read a bare number as seconds") {
  CHECK(parse_duration("30s").value() == 30s);
  CHECK(parse_duration("30").value() == 30s);
  CHECK(parse_duration("500ms").value() == 500ms);
  CHECK(parse_duration("250us").value() == 250us);
  CHECK(parse_duration("7ns").value() == 7ns);
  CHECK(parse_duration("2m").value() == 2min);
  CHECK(parse_duration("2min").value() == 2min);
  CHECK(parse_duration("1h").value() == 1h);
  CHECK(parse_duration("1h30m").value() == 90min);
  CHECK(parse_duration("1m30s").value() == 90s);
  CHECK(parse_duration("1.5s").value() == 1500ms);
  CHECK(parse_duration("0.25").value() == 250ms);
  CHECK(parse_duration("0s").value() == 0s);
  CHECK(parse_duration("30S").value() == 30s);
}

TEST_CASE("bad durations say what is wrong") {
  CHECK(duration_error("") == "empty value");
  CHECK(duration_error("5d").find("unknown duration unit 'd'") != std::string::npos);
  CHECK(duration_error("-5s") == "negative values are not allowed");
  CHECK(duration_error("s") == "expected a number");
  CHECK(duration_error("1.5ns") == "not a whole number of nanoseconds");
  CHECK(duration_error("1m30") == "every part of a combined duration needs a unit, as in 1m30s");
  CHECK(duration_error("9999999999999h") == "value is too large");
}

TEST_CASE("booleans and integers") {
  for (const char* yes : {"true", "1", "yes", "on", "TRUE", "On"}) CHECK(parse_bool(yes).value());
  for (const char* no : {"false", "0", "no", "off", "False", "OFF"}) CHECK_FALSE(parse_bool(no).value());
  CHECK(parse_bool("maybe").status().message() == "not a boolean");
  CHECK(parse_bool("").status().message() == "not a boolean");

  CHECK(parse_int("42").value() == 42);
  CHECK(parse_int("-7").value() == -7);
  CHECK(parse_int("+7").value() == 7);
  CHECK(parse_int("9223372036854775807").value() == INT64_MAX);
  CHECK(parse_int("9223372036854775808").status().message() == "value is out of range");
  CHECK(parse_int("4k").status().message() == "not a whole number");
  CHECK(parse_int("").status().message() == "empty value");
}

TEST_CASE("addresses are HOST:PORT, IPv6 in brackets, or off") {
  auto v4 = parse_address("127.0.0.1:9400");
  REQUIRE(v4.ok());
  REQUIRE(v4.value().has_value());
  CHECK(v4.value()->host == "127.0.0.1");
  CHECK(v4.value()->port == 9400);

  auto name = parse_address("node-3.cluster:0");
  REQUIRE(name.ok());
  CHECK(name.value()->host == "node-3.cluster");
  CHECK(name.value()->port == 0);

  auto v6 = parse_address("[::1]:65535");
  REQUIRE(v6.ok());
  CHECK(v6.value()->host == "::1");
  CHECK(v6.value()->port == 65535);
  CHECK(v6.value()->to_string() == "[::1]:65535");
  CHECK(v4.value()->to_string() == "127.0.0.1:9400");

  CHECK_FALSE(parse_address("off").value().has_value());
  CHECK_FALSE(parse_address("").value().has_value());
}

TEST_CASE("bad addresses say what is wrong") {
  CHECK(address_error("localhost") == "missing ':PORT'");
  CHECK(address_error(":9400") == "missing host (use 0.0.0.0 to listen on every interface)");
  CHECK(address_error("host:") == "missing port number");
  CHECK(address_error("host:65536") == "port '65536' is not a number from 0 to 65535");
  CHECK(address_error("host:-1") == "port '-1' is not a number from 0 to 65535");
  CHECK(address_error("host:http") == "port 'http' is not a number from 0 to 65535");
  CHECK(address_error("::1:9400") == "an IPv6 address goes in brackets, as in [::1]:9400");
  CHECK(address_error("[::1:9400") == "missing ']' after the IPv6 address");
  CHECK(address_error("[::1]9400") == "missing ':PORT' after ']'");
  CHECK(address_error("[]:9400") == "empty IPv6 address in brackets");
  CHECK(address_error("ho st:1") == "invalid character ' ' in the host name");
}

TEST_CASE("formatting picks the largest exact unit") {
  CHECK(format_bytes(0) == "0");
  CHECK(format_bytes(1536) == "1536");
  CHECK(format_bytes(64 * KiB) == "64KiB");
  CHECK(format_bytes(GiB) == "1GiB");
  CHECK(format_bytes(64 * GiB) == "64GiB");
  CHECK(format_duration(0s) == "0s");
  CHECK(format_duration(300s) == "5m");
  CHECK(format_duration(1500ms) == "1500ms");
  CHECK(format_duration(2h) == "2h");
  CHECK(format_duration(7ns) == "7ns");
  // What format_* writes parses back to the same value.
  for (std::uint64_t b : {std::uint64_t{1}, 3 * MiB, 5 * GiB + 1, 1024 * GiB}) {
    CHECK(parse_bytes(format_bytes(b)).value() == b);
  }
  for (auto d : {std::chrono::nanoseconds(1), std::chrono::nanoseconds(90s), std::chrono::nanoseconds(250us)}) {
    CHECK(parse_duration(format_duration(d)).value() == d);
  }
}

}  // namespace test_common_units
