// The Prometheus text format 0.0.4, both directions: the writer's building blocks
// (value formatting, escaping, name rules; declared in metrics.h) and the parser
// that reads an exposition back (metrics_text.h).
#include "common/metrics_text.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>

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

// ---- Reading ----

namespace {

bool is_blank(char c) { return c == ' ' || c == '\t'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const char x = a[i] >= 'A' && a[i] <= 'Z' ? static_cast<char>(a[i] - 'A' + 'a') : a[i];
    if (x != b[i]) return false;
  }
  return true;
}

// A Go float (strconv.ParseFloat): decimal or exponent form, NaN, [+-]Inf,
// [+-]Infinity, case-insensitive.
std::optional<double> parse_float(std::string_view text) {
  if (equals_ignoring_case(text, "nan")) return std::numeric_limits<double>::quiet_NaN();
  double sign = 1;
  std::string_view digits = text;
  if (!digits.empty() && (digits.front() == '+' || digits.front() == '-')) {
    if (digits.front() == '-') sign = -1;
    digits.remove_prefix(1);
  }
  if (equals_ignoring_case(digits, "inf") || equals_ignoring_case(digits, "infinity"))
    return sign * std::numeric_limits<double>::infinity();
  // Digits or a point first: from_chars would also take "nan" and "inf" forms
  // Go does not (after a sign, or with a payload).
  if (digits.empty() || !(is_digit(digits.front()) || digits.front() == '.')) return std::nullopt;
  double value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return sign * value;
}

// One sample line, parsed left to right; the first problem is kept in error().
class SampleLine {
 public:
  explicit SampleLine(std::string_view line) : s_(line) {}

  std::optional<Sample> parse() {
    Sample sample;
    skip_blanks();
    if (!name(sample.name, /*metric=*/true)) return fail("a sample must begin with a metric name");
    if (peek() == '{' && !labels(sample)) return std::nullopt;
    if (i_ >= s_.size()) return fail("no value after '" + std::string(s_.substr(0, i_)) + "'");
    if (!at_blank()) return fail("expected a space and the value after '" + std::string(s_.substr(0, i_)) + "'");
    skip_blanks();
    const std::string_view value_text = token();
    if (value_text.empty()) return fail("no value");
    const auto value = parse_float(value_text);
    if (!value) return fail("value '" + std::string(value_text) + "' is not a number (nor NaN, +Inf, -Inf)");
    sample.value = *value;
    skip_blanks();
    if (i_ < s_.size()) {
      const std::string_view ts = token();
      std::int64_t t = 0;
      const auto [end, ec] = std::from_chars(ts.data(), ts.data() + ts.size(), t);
      if (ec != std::errc() || end != ts.data() + ts.size())
        return fail("timestamp '" + std::string(ts) + "' is not a whole number of milliseconds");
      sample.timestamp_ms = t;
      skip_blanks();
      if (i_ < s_.size()) return fail("unexpected text after the timestamp");
    }
    return sample;
  }

  const std::string& error() const { return error_; }

 private:
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  bool at_blank() const { return i_ < s_.size() && is_blank(s_[i_]); }
  void skip_blanks() {
    while (at_blank()) ++i_;
  }
  std::string_view token() {
    const std::size_t start = i_;
    while (i_ < s_.size() && !is_blank(s_[i_])) ++i_;
    return s_.substr(start, i_ - start);
  }
  // Keeps the first problem; false / nullopt for the caller to return.
  bool bad(std::string why) {
    if (error_.empty()) error_ = std::move(why);
    return false;
  }
  std::nullopt_t fail(std::string why) {
    bad(std::move(why));
    return std::nullopt;
  }

  // Metric names may contain ':' (recording rules); label names may not.
  bool name(std::string& out, bool metric) {
    const auto ok_start = [&](char c) { return is_name_start(c) || (metric && c == ':'); };
    const auto ok_char = [&](char c) { return is_name_char(c) || (metric && c == ':'); };
    if (i_ >= s_.size() || !ok_start(s_[i_])) return false;
    const std::size_t start = i_;
    while (i_ < s_.size() && ok_char(s_[i_])) ++i_;
    out.assign(s_.substr(start, i_ - start));
    return true;
  }

  // {name="value",...} with an optional trailing comma; i_ is at '{'.
  bool labels(Sample& sample) {
    ++i_;
    for (;;) {
      skip_blanks();
      if (peek() == '}') {
        ++i_;
        return true;
      }
      std::string label_name;
      if (!name(label_name, /*metric=*/false)) {
        if (i_ >= s_.size()) return bad("the label set is not closed by '}'");
        return bad("expected a label name or '}' at column " + std::to_string(i_ + 1));
      }
      for (const auto& [seen, value] : sample.labels)
        if (seen == label_name) return bad("label '" + label_name + "' appears twice");
      skip_blanks();
      if (peek() != '=') return bad("expected '=' after label name '" + label_name + "'");
      ++i_;
      skip_blanks();
      if (peek() != '"') return bad("the value of label '" + label_name + "' must be in double quotes");
      ++i_;
      std::string value;
      if (!quoted_rest(label_name, value)) return false;
      skip_blanks();
      if (peek() != ',' && peek() != '}')
        return bad(i_ >= s_.size() ? "the label set is not closed by '}'"
                                   : "expected ',' or '}' after the value of label '" + label_name + "'");
      if (peek() == ',') ++i_;
      sample.labels.emplace_back(std::move(label_name), std::move(value));
    }
  }

  // The rest of a quoted label value, unescaped, and the closing quote.
  bool quoted_rest(const std::string& label_name, std::string& out) {
    while (i_ < s_.size()) {
      const char c = s_[i_++];
      if (c == '"') return true;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) break;
      const char e = s_[i_++];
      if (e == '\\' || e == '"') {
        out += e;
      } else if (e == 'n') {
        out += '\n';
      } else {
        return bad("the value of label '" + label_name + "' has the escape '\\" + std::string(1, e) +
                     "' (only \\\\, \\\" and \\n are allowed)");
      }
    }
    return bad("the value of label '" + label_name + "' is not closed by '\"'");
  }

  std::string_view s_;
  std::size_t i_ = 0;
  std::string error_;
};

// The line for an error message, cut when long.
std::string quote_line(std::string_view line) {
  constexpr std::size_t kMax = 120;
  return line.size() <= kMax ? std::string(line) : std::string(line.substr(0, kMax)) + "...";
}

}  // namespace

std::string_view Sample::label(std::string_view label_name) const {
  for (const auto& [n, v] : labels)
    if (n == label_name) return v;
  return {};
}

Result<std::vector<Sample>> parse_text(std::string_view text) {
  std::vector<Sample> samples;
  std::size_t line_number = 0;
  while (!text.empty()) {
    const std::size_t newline = text.find('\n');
    const std::string_view line = text.substr(0, newline);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    ++line_number;
    std::size_t first = 0;
    while (first < line.size() && is_blank(line[first])) ++first;
    if (first == line.size() || line[first] == '#') continue;
    SampleLine parser(line);
    auto sample = parser.parse();
    if (!sample)
      return Status::InvalidArgument("line " + std::to_string(line_number) + ": " + parser.error() + ": " +
                                     quote_line(line));
    samples.push_back(std::move(*sample));
  }
  return samples;
}

}  // namespace ringsync::metrics
