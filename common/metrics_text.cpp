// Text-format 0.0.4 building blocks: value formatting, escaping, name rules.
#include <charconv>
#include <cmath>
#include <cstdint>

#include "common/metrics.h"
#include "common/utf8.h"

namespace ringsync::metrics {
namespace {

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
      const std::size_t len = text::utf8_sequence_length(text, i);
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
