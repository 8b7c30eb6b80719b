#include "common/units.h"

#include <array>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <limits>
#include <utility>

#include "common/text.h"

namespace ringsync::units {

using text::lower;
using text::trim;
namespace {

using Wide = unsigned __int128;

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// A non-negative decimal "123" or "1.25" read from the front of `text`.
struct Decimal {
  Wide whole = 0;
  Wide fraction = 0;       // the digits after the point, as an integer
  Wide fraction_scale = 1;  // 10^(number of fraction digits)
};

constexpr int kMaxWholeDigits = 20;     // enough for any uint64
constexpr int kMaxFractionDigits = 18;  // 10^18 still fits comfortably

// Consumes a decimal from the front of `text`; an error when there is none.
Result<Decimal> take_decimal(std::string_view& text) {
  Decimal d;
  std::size_t i = 0;
  int whole_digits = 0;
  while (i < text.size() && is_digit(text[i])) {
    if (++whole_digits > kMaxWholeDigits) return Status::InvalidArgument("number is too large");
    d.whole = d.whole * 10 + static_cast<unsigned>(text[i] - '0');
    ++i;
  }
  bool any_digit = whole_digits > 0;
  if (i < text.size() && text[i] == '.') {
    ++i;
    int fraction_digits = 0;
    while (i < text.size() && is_digit(text[i])) {
      if (++fraction_digits > kMaxFractionDigits) return Status::InvalidArgument("too many digits after the point");
      d.fraction = d.fraction * 10 + static_cast<unsigned>(text[i] - '0');
      d.fraction_scale *= 10;
      ++i;
    }
    any_digit = any_digit || fraction_digits > 0;
  }
  if (!any_digit) {
    if (!text.empty() && text.front() == '-') return Status::InvalidArgument("negative values are not allowed");
    return Status::InvalidArgument("expected a number");
  }
  text.remove_prefix(i);
  return d;
}

// d * multiplier, which must be whole and no larger than `limit`.
Result<Wide> scale(const Decimal& d, Wide multiplier, Wide limit, std::string_view what) {
  const Wide fractional = d.fraction * multiplier;
  if (fractional % d.fraction_scale != 0) {
    return Status::InvalidArgument("not a whole number of " + std::string(what));
  }
  if (d.whole > limit / multiplier) return Status::InvalidArgument("value is too large");
  const Wide total = d.whole * multiplier + fractional / d.fraction_scale;
  if (total > limit) return Status::InvalidArgument("value is too large");
  return total;
}

struct Unit {
  std::string_view name;
  std::uint64_t multiplier;
};

constexpr std::uint64_t kKi = 1024;
constexpr std::array<Unit, 17> kByteUnits{{
    {"", 1}, {"b", 1},
    {"k", kKi}, {"kb", kKi}, {"kib", kKi},
    {"m", kKi * kKi}, {"mb", kKi * kKi}, {"mib", kKi * kKi},
    {"g", kKi * kKi * kKi}, {"gb", kKi * kKi * kKi}, {"gib", kKi * kKi * kKi},
    {"t", kKi * kKi * kKi * kKi}, {"tb", kKi * kKi * kKi * kKi}, {"tib", kKi * kKi * kKi * kKi},
    {"p", kKi * kKi * kKi * kKi * kKi}, {"pb", kKi * kKi * kKi * kKi * kKi},
    {"pib", kKi * kKi * kKi * kKi * kKi},
}};

constexpr std::uint64_t kUs = 1000;
constexpr std::uint64_t kMs = 1000 * kUs;
constexpr std::uint64_t kSec = 1000 * kMs;
constexpr std::array<Unit, 9> kDurationUnits{{
    {"ns", 1}, {"us", kUs}, {"\xc2\xb5s", kUs}, {"ms", kMs}, {"s", kSec},
    {"m", 60 * kSec}, {"min", 60 * kSec}, {"h", 3600 * kSec}, {"", kSec},
}};

template <std::size_t N>
const Unit* find_unit(const std::array<Unit, N>& units, std::string_view name) {
  const std::string key = lower(name);
  for (const Unit& u : units) {
    if (u.name == key) return &u;
  }
  return nullptr;
}

}  // namespace

Result<std::uint64_t> parse_bytes(std::string_view text) {
  std::string_view rest = trim(text);
  if (rest.empty()) return Status::InvalidArgument("empty value");
  auto number = take_decimal(rest);
  if (!number.ok()) return number.status();
  const std::string_view suffix = trim(rest);
  const Unit* unit = find_unit(kByteUnits, suffix);
  if (unit == nullptr) {
    return Status::InvalidArgument("unknown size unit '" + std::string(suffix) +
                                   "' (use K, M, G, T, P with an optional B or iB)");
  }
  auto total = scale(*number, unit->multiplier, std::numeric_limits<std::uint64_t>::max(), "bytes");
  if (!total.ok()) return total.status();
  return static_cast<std::uint64_t>(*total);
}

Result<double> parse_rate(std::string_view text) {
  std::string_view rest = trim(text);
  if (rest.empty()) return Status::InvalidArgument("empty value");
  const std::string key = lower(rest);
  static constexpr std::pair<std::string_view, double> kBits[] = {
      {"tbit", 1e12}, {"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}, {"bit", 1.0}};
  for (const auto& [suffix, multiplier] : kBits) {
    if (key.size() <= suffix.size() || key.compare(key.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    std::string_view number_text = rest.substr(0, rest.size() - suffix.size());
    auto number = take_decimal(number_text);
    if (!number.ok()) return number.status();
    if (!trim(number_text).empty())
      return Status::InvalidArgument("unknown rate '" + std::string(rest) + "' (use " + std::string(kRateForm) + ")");
    const double value = static_cast<double>(number->whole) +
                         static_cast<double>(number->fraction) / static_cast<double>(number->fraction_scale);
    return value * multiplier / 8.0;
  }
  auto bytes = parse_bytes(rest);
  if (!bytes.ok())
    return Status::InvalidArgument("unknown rate '" + std::string(rest) + "' (use " + std::string(kRateForm) + ")");
  return static_cast<double>(*bytes);
}

Result<std::chrono::nanoseconds> parse_duration(std::string_view text) {
  std::string_view rest = trim(text);
  if (rest.empty()) return Status::InvalidArgument("empty value");
  const Wide limit = static_cast<Wide>(std::numeric_limits<std::int64_t>::max());
  Wide total = 0;
  int parts = 0;
  while (!rest.empty()) {
    auto number = take_decimal(rest);
    if (!number.ok()) return number.status();
    std::size_t unit_len = 0;
    while (unit_len < rest.size() && !is_digit(rest[unit_len]) && rest[unit_len] != '.') ++unit_len;
    const std::string_view unit_name = rest.substr(0, unit_len);
    rest.remove_prefix(unit_len);
    ++parts;
    const Unit* unit = find_unit(kDurationUnits, trim(unit_name));
    if (unit == nullptr) {
      return Status::InvalidArgument("unknown duration unit '" + std::string(trim(unit_name)) +
                                     "' (use ns, us, ms, s, m, h)");
    }
    if (unit->name.empty() && (parts > 1 || !rest.empty())) {
      return Status::InvalidArgument("every part of a combined duration needs a unit, as in 1m30s");
    }
    auto part = scale(*number, unit->multiplier, limit, "nanoseconds");
    if (!part.ok()) return part.status();
    total += *part;
    if (total > limit) return Status::InvalidArgument("value is too large");
  }
  return std::chrono::nanoseconds(static_cast<std::int64_t>(total));
}

Result<bool> parse_bool(std::string_view text) {
  const std::string v = lower(trim(text));
  if (v == "true" || v == "1" || v == "yes" || v == "on") return true;
  if (v == "false" || v == "0" || v == "no" || v == "off") return false;
  return Status::InvalidArgument("not a boolean");
}

Result<std::int64_t> parse_int(std::string_view text) {
  std::string_view v = trim(text);
  if (v.empty()) return Status::InvalidArgument("empty value");
  if (v.front() == '+') v.remove_prefix(1);
  std::int64_t out = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec == std::errc::result_out_of_range) return Status::InvalidArgument("value is out of range");
  if (ec != std::errc() || end != v.data() + v.size()) return Status::InvalidArgument("not a whole number");
  return out;
}

std::string Address::to_string() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Result<std::optional<Address>> parse_address(std::string_view text) {
  const std::string_view v = trim(text);
  if (v.empty() || lower(v) == "off") return std::optional<Address>();
  std::string_view host;
  std::string_view port;
  if (v.front() == '[') {
    const std::size_t close = v.find(']');
    if (close == std::string_view::npos) return Status::InvalidArgument("missing ']' after the IPv6 address");
    host = v.substr(1, close - 1);
    const std::string_view after = v.substr(close + 1);
    if (after.empty() || after.front() != ':') return Status::InvalidArgument("missing ':PORT' after ']'");
    port = after.substr(1);
    if (host.empty()) return Status::InvalidArgument("empty IPv6 address in brackets");
    for (char c : host) {
      if (!std::isxdigit(static_cast<unsigned char>(c)) && c != ':' && c != '.' && c != '%' &&
          !std::isalnum(static_cast<unsigned char>(c))) {
        return Status::InvalidArgument("invalid character in the IPv6 address");
      }
    }
  } else {
    const std::size_t colon = v.rfind(':');
    if (colon == std::string_view::npos) return Status::InvalidArgument("missing ':PORT'");
    host = v.substr(0, colon);
    port = v.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) {
      return Status::InvalidArgument("an IPv6 address goes in brackets, as in [::1]:9400");
    }
    if (host.empty()) return Status::InvalidArgument("missing host (use 0.0.0.0 to listen on every interface)");
    for (char c : host) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') {
        return Status::InvalidArgument("invalid character '" + std::string(1, c) + "' in the host name");
      }
    }
  }
  if (port.empty()) return Status::InvalidArgument("missing port number");
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc() || end != port.data() + port.size() || value > 65535) {
    return Status::InvalidArgument("port '" + std::string(port) + "' is not a number from 0 to 65535");
  }
  return std::optional<Address>(Address{std::string(host), static_cast<std::uint16_t>(value)});
}

std::string format_bytes(std::uint64_t bytes) {
  static constexpr std::array<std::pair<std::uint64_t, const char*>, 5> kUnits{{
      {kKi * kKi * kKi * kKi * kKi, "PiB"},
      {kKi * kKi * kKi * kKi, "TiB"},
      {kKi * kKi * kKi, "GiB"},
      {kKi * kKi, "MiB"},
      {kKi, "KiB"},
  }};
  if (bytes == 0) return "0";
  for (const auto& [multiplier, name] : kUnits) {
    if (bytes % multiplier == 0) return std::to_string(bytes / multiplier) + name;
  }
  return std::to_string(bytes);
}

std::string format_duration(std::chrono::nanoseconds d) {
  static constexpr std::array<std::pair<std::int64_t, const char*>, 6> kUnits{{
      {3600 * static_cast<std::int64_t>(kSec), "h"},
      {60 * static_cast<std::int64_t>(kSec), "m"},
      {static_cast<std::int64_t>(kSec), "s"},
      {static_cast<std::int64_t>(kMs), "ms"},
      {static_cast<std::int64_t>(kUs), "us"},
      {1, "ns"},
  }};
  const std::int64_t ns = d.count();
  if (ns == 0) return "0s";
  for (const auto& [multiplier, name] : kUnits) {
    if (ns % multiplier == 0) return std::to_string(ns / multiplier) + name;
  }
  return std::to_string(ns) + "ns";
}

std::string format_seconds(std::chrono::nanoseconds d) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f s", std::chrono::duration<double>(d).count());
  return text;
}

}  // namespace ringsync::units
