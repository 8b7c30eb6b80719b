// Text-format 0.0.4 building blocks: value formatting, escaping, name rules.
#include <charconv>
#include <cmath>
#include <cstdint>

#include "common/metrics.h"

namespace ringsync::metrics {
namespace {

// Length of the well-formed UTF-8 sequence that starts at s[i], or 0 if the
// bytes there are not one (stray continuation, overlong form, surrogate,
// beyond U+10FFFF, truncated).
std::size_t utf8_sequence_length(std::string_view s, std::size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return 1;
  std::size_t len = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 == 0xE0) {
    len = 3, lo = 0xA0;
  } else if ((b0 >= 0xE1 && b0 <= 0xEC) || b0 == 0xEE || b0 == 0xEF) {
    len = 3;
  } else if (b0 == 0xED) {
    len = 3, hi = 0x9F;
  } else if (b0 == 0xF0) {
    len = 4, lo = 0x90;
  } else if (b0 >= 0xF1 && b0 <= 0xF3) {
    len = 4;
  } else if (b0 == 0xF4) {
    len = 4, hi = 0x8F;
  } else {
    return 0;
  }
  if (s.size() - i < len) return 0;
  const auto b1 = static_cast<unsigned char>(s[i + 1]);
  if (b1 < lo || b1 > hi) return 0;
  for (std::size_t k = 2; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if (b < 0x80 || b > 0xBF) return 0;
  }
  return len;
}

void append_escaped(std::string& out, std::string_view text, bool escape_quote) {
  constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && escape_quote) {
      out += "\\\"";
    } else {
      const std::size_t len = utf8_sequence_length(text, i);
      if (len == 0) {
        out += kReplacement;
        ++i;
        continue;
      }
      out.append(text.substr(i, len));
      i += len;
      continue;
    }
    ++i;
  }
}

bool is_lower_alpha_or_underscore(char c) { return (c >= 'a' && c <= 'z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool is_snake_case_identifier(std::string_view name) {
  if (name.empty() || !is_lower_alpha_or_underscore(name.front())) return false;
  for (char c : name) {
    if (!is_lower_alpha_or_underscore(c) && !is_digit(c)) return false;
  }
  return true;
}

}  // namespace

void append_value(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
    return;
  }
  if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
    return;
  }
  // Integers are exact in a double below 2^53: print them as integers.
  constexpr double kTwoPow53 = 9007199254740992.0;
  char buf[32];
  std::to_chars_result r{};
  if (v == std::trunc(v) && std::fabs(v) < kTwoPow53) {
    r = std::to_chars(buf, buf + sizeof buf, static_cast<std::int64_t>(v));
  } else {
    r = std::to_chars(buf, buf + sizeof buf, v);  // shortest round-trip
  }
  out.append(buf, r.ptr);
}

std::string format_value(double v) {
  std::string out;
  append_value(out, v);
  return out;
}

void append_escaped_help(std::string& out, std::string_view text) { append_escaped(out, text, false); }

void append_escaped_label_value(std::string& out, std::string_view value) {
  append_escaped(out, value, true);
}

bool is_valid_metric_name(std::string_view name) { return is_snake_case_identifier(name); }

bool is_valid_label_name(std::string_view name) {
  if (!is_snake_case_identifier(name)) return false;
  if (name.starts_with("__")) return false;  // reserved for Prometheus itself
  return name != "le" && name != "quantile";  // reserved for histograms / summaries
}

}  // namespace ringsync::metrics
