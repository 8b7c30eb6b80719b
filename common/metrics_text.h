// Reading the Prometheus text exposition format (0.0.4): the inverse of what the
// registry renders (common/metrics.h), for `ringsync top` and the tests. The
// writer's building blocks (value formatting, escaping) live beside this parser
// in metrics_text.cpp, so both directions of the format keep the same rules.
//
// One sample per line:
//   name [{label="value",...}] value [timestamp_ms]
// Names are [a-zA-Z_:][a-zA-Z0-9_:]*, label names [a-zA-Z_][a-zA-Z0-9_]*; label
// values escape `\\`, `\"` and `\n` (any other escape is an error); a trailing
// comma inside the braces is allowed. Values are Go floats: decimal or exponent
// forms, NaN, +Inf, -Inf (case-insensitive). Blank lines and lines starting with
// `#` (HELP, TYPE, comments) are skipped.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace ringsync::metrics {

struct Sample {
  std::string name;  // the sample's name: a histogram's series end in _bucket/_sum/_count
  std::vector<std::pair<std::string, std::string>> labels;  // in the order written, unescaped
  double value = 0;
  std::optional<std::int64_t> timestamp_ms;

  // The value of label `name`; "" when the sample has no such label (as in PromQL).
  std::string_view label(std::string_view name) const;
};

// Every sample of `text`, in order. A malformed line fails the whole text with
// InvalidArgument("line N: what is wrong: <the line>"), N counted from 1.
Result<std::vector<Sample>> parse_text(std::string_view text);

}  // namespace ringsync::metrics
