// The text-format parser: what the registry writes reads back exactly, the
// forms other exporters write are read, and malformed lines are rejected with
// their line number.
#include "common/metrics_text.h"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>

#include "common/metrics.h"

namespace test_common_metrics_text {

namespace m = ringsync::metrics;

namespace {

// The samples of `text`; fails the test when it does not parse.
std::vector<m::Sample> parse(const std::string& text) {
  auto samples = m::parse_text(text);
  REQUIRE_MESSAGE(samples.ok(), samples.status().message());
  return *samples;
}

// The error message for `text`, which must not parse.
std::string error_of(const std::string& text) {
  auto samples = m::parse_text(text);
  REQUIRE_MESSAGE(!samples.ok(), "parsed, but should not have: ", text);
  CHECK(samples.status().code() == ringsync::StatusCode::kInvalidArgument);
  return samples.status().message();
}

}  // namespace

TEST_CASE("a sample with no labels, with labels, with a timestamp") {
  const auto samples = parse(
      "ringsync_clients 3\n"
      "ringsync_link_bytes_total{job_id=\"a\",peer=\"1\",direction=\"tx\"} 1024\n"
      "http_requests_total{method=\"post\",code=\"200\"} 1027 1395066363000\n");
  REQUIRE(samples.size() == 3);
  CHECK(samples[0].name == "ringsync_clients");
  CHECK(samples[0].labels.empty());
  CHECK(samples[0].value == 3);
  CHECK(!samples[0].timestamp_ms);
  CHECK(samples[1].labels.size() == 3);
  CHECK(samples[1].label("job_id") == "a");
  CHECK(samples[1].label("direction") == "tx");
  CHECK(samples[1].label("absent") == "");
  CHECK(samples[1].value == 1024);
  CHECK(samples[2].timestamp_ms == 1395066363000);
}

TEST_CASE("comments, HELP, TYPE and blank lines are skipped") {
  const auto samples = parse(
      "# HELP x_total Things with a \\\\ and a \\n in the help.\n"
      "# TYPE x_total counter\n"
      "\n"
      "   \t\n"
      "# any comment { not a sample\n"
      "  # an indented comment\n"
      "x_total 1\n");
  REQUIRE(samples.size() == 1);
  CHECK(samples[0].name == "x_total");
}

TEST_CASE("label values are unescaped: \\\\ \\\" \\n; other bytes pass as they are") {
  const auto samples = parse(
      "m{a=\"back\\\\slash\",b=\"say \\\"hi\\\"\",c=\"two\\nlines\",d=\"\",e=\"caf\xC3\xA9 {,} = #\"} 1\n");
  REQUIRE(samples.size() == 1);
  CHECK(samples[0].label("a") == "back\\slash");
  CHECK(samples[0].label("b") == "say \"hi\"");
  CHECK(samples[0].label("c") == "two\nlines");
  CHECK(samples[0].label("d") == "");
  CHECK(samples[0].label("e") == "caf\xC3\xA9 {,} = #");
}

TEST_CASE("values: integers, decimals, exponents, NaN and infinities") {
  const auto samples = parse(
      "a 0\nb -1.5\nc 1e-05\nd 6.02E+23\ne NaN\nf +Inf\ng -Inf\nh nan\ni inf\nj .5\nk +3\n");
  REQUIRE(samples.size() == 11);
  CHECK(samples[0].value == 0);
  CHECK(samples[1].value == -1.5);
  CHECK(samples[2].value == 1e-05);
  CHECK(samples[3].value == 6.02e23);
  CHECK(std::isnan(samples[4].value));
  CHECK(samples[5].value == std::numeric_limits<double>::infinity());
  CHECK(samples[6].value == -std::numeric_limits<double>::infinity());
  CHECK(std::isnan(samples[7].value));
  CHECK(samples[8].value == std::numeric_limits<double>::infinity());
  CHECK(samples[9].value == 0.5);
  CHECK(samples[10].value == 3);
}

TEST_CASE("blanks around labels, a trailing comma, tabs, no final newline, empty braces") {
  const auto samples = parse("m{ a = \"1\" , b=\"2\", }\t7\t-3\nn{} 8\nrule:name_x 9");
  REQUIRE(samples.size() == 3);
  CHECK(samples[0].label("a") == "1");
  CHECK(samples[0].label("b") == "2");
  CHECK(samples[0].value == 7);
  CHECK(samples[0].timestamp_ms == -3);
  CHECK(samples[1].labels.empty());
  CHECK(samples[2].name == "rule:name_x");
}

TEST_CASE("what the registry renders reads back exactly: histograms, escapes, special values") {
  m::Registry registry;
  registry.counter("t_bytes_total", "Bytes.", {"peer", "direction"}).with({"1", "tx"}).inc(12345678901.0);
  registry.gauge("t_odd", "Odd labels.", {"label"}).with({"quote \" slash \\ newline \n end"}).set(0.1);
  registry.gauge("t_nan", "NaN.").with().set(std::numeric_limits<double>::quiet_NaN());
  registry.gauge("t_inf", "Inf.").with().set(-std::numeric_limits<double>::infinity());
  auto& h = registry.histogram("t_wait_seconds", "Wait.", {0.001, 0.01}, {"rank"}).with({"0"});
  h.observe(0.0005);
  h.observe(0.005);
  h.observe(5);

  const auto samples = parse(registry.render());
  auto find = [&](const std::string& name, const std::string& label = "", const std::string& value = "") {
    for (const auto& s : samples)
      if (s.name == name && (label.empty() || s.label(label) == value)) return s;
    FAIL("no sample ", name, " ", label, "=", value);
    return m::Sample{};
  };
  CHECK(find("t_bytes_total", "direction", "tx").value == 12345678901.0);
  CHECK(find("t_bytes_total").label("peer") == "1");
  CHECK(find("t_odd").label("label") == "quote \" slash \\ newline \n end");
  CHECK(find("t_odd").value == 0.1);
  CHECK(std::isnan(find("t_nan").value));
  CHECK(find("t_inf").value == -std::numeric_limits<double>::infinity());
  CHECK(find("t_wait_seconds_bucket", "le", "0.001").value == 1);
  CHECK(find("t_wait_seconds_bucket", "le", "0.01").value == 2);
  CHECK(find("t_wait_seconds_bucket", "le", "+Inf").value == 3);
  CHECK(find("t_wait_seconds_count").value == 3);
  CHECK(find("t_wait_seconds_sum").value == doctest::Approx(5.0055));
  CHECK(find("t_wait_seconds_sum").label("rank") == "0");
}

TEST_CASE("malformed lines are rejected, naming the line and what is wrong") {
  // The line number counts comments and blank lines too.
  const std::string e = error_of("# HELP a A.\n\na 1\nb{x=\"1\"\n");
  CHECK(e.rfind("line 4: ", 0) == 0);
  CHECK(e.find("not closed by '}'") != std::string::npos);
  CHECK(e.find(": b{x=\"1\"") != std::string::npos);  // the line itself

  struct Case {
    const char* text;
    const char* says;
  };
  const Case cases[] = {
      {"a\n", "no value after 'a'"},
      {"a \n", "no value"},
      {"a{} \n", "no value"},
      {"a one\n", "'one' is not a number"},
      {"a 1.5.2\n", "'1.5.2' is not a number"},
      {"a 0x10\n", "'0x10' is not a number"},
      {"a +NaN\n", "'+NaN' is not a number"},
      {"a 1 2 3\n", "unexpected text after the timestamp"},
      {"a 1 12.5\n", "timestamp '12.5' is not a whole number"},
      {"1a 1\n", "must begin with a metric name"},
      {"{a=\"1\"} 1\n", "must begin with a metric name"},
      {"a-b 1\n", "expected a space and the value after 'a'"},
      {"a{x=1} 1\n", "value of label 'x' must be in double quotes"},
      {"a{x=\"1} 1\n", "value of label 'x' is not closed by '\"'"},
      {"a{x=\"\\t\"} 1\n", "has the escape '\\t'"},
      {"a{x=\"1\\", "is not closed by '\"'"},
      {"a{x} 1\n", "expected '=' after label name 'x'"},
      {"a{x=\"1\" y=\"2\"} 1\n", "expected ',' or '}' after the value of label 'x'"},
      {"a{x=\"1\",x=\"2\"} 1\n", "label 'x' appears twice"},
      {"a{1x=\"1\"} 1\n", "expected a label name or '}'"},
      {"a{x:y=\"1\"} 1\n", "expected '=' after label name 'x'"},
      {"a{,} 1\n", "expected a label name or '}'"},
      {"a{x=\"1\"\n", "not closed by '}'"},
      {"a 1\r\n", "'1\r' is not a number"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.text);
    const std::string message = error_of(c.text);
    CHECK(message.rfind("line 1: ", 0) == 0);
    CHECK_MESSAGE(message.find(c.says) != std::string::npos, message);
  }
}

TEST_CASE("an empty text has no samples; a long bad line is cut in the message") {
  CHECK(parse("").empty());
  CHECK(parse("# only a comment").empty());
  const std::string long_line = "a{x=\"" + std::string(500, 'v') + "\"} oops\n";
  const std::string message = error_of(long_line);
  CHECK(message.size() < 300);
  CHECK(message.find("...") != std::string::npos);
}

}  // namespace test_common_metrics_text
