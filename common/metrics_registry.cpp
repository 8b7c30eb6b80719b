// The registry: registration rules (names, labels, buckets) and rendering.
#include <charconv>
#include <cmath>
#include <stdexcept>

#include "common/metrics.h"

namespace ringsync::metrics {
namespace {

using detail::join_names;
using detail::kind_name;

[[noreturn]] void reject(const std::string& what) { throw std::invalid_argument(what); }

void validate_name(detail::Kind kind, const std::string& name) {
  const std::string quoted = "'" + name + "'";
  if (!is_valid_metric_name(name)) {
    reject("metric name " + quoted + " is invalid: use snake_case [a-z_][a-z0-9_]* (no upper case, no ':')");
  }
  const bool has_total = name.ends_with("_total");
  if (kind == detail::Kind::kCounter && !has_total) {
    reject("counter " + quoted + " must end in '_total' (Prometheus naming convention)");
  }
  if (kind != detail::Kind::kCounter && has_total) {
    reject(std::string(kind_name(kind)) + " " + quoted + " must not end in '_total': only counters do");
  }
  for (const char* reserved : {"_bucket", "_sum", "_count"}) {
    if (name.ends_with(reserved)) {
      reject("metric name " + quoted + " must not end in '" + reserved +
             "': histograms render samples with that suffix");
    }
  }
}

void validate_labels(const std::string& metric, const std::vector<std::string>& label_names) {
  for (std::size_t i = 0; i < label_names.size(); ++i) {
    const auto& label = label_names[i];
    if (!is_valid_label_name(label)) {
      reject("label name '" + label + "' of metric '" + metric +
             "' is invalid: use snake_case [a-z_][a-z0-9_]*, not starting with '__', not 'le' or 'quantile'");
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (label_names[j] == label) reject("metric '" + metric + "' names label '" + label + "' twice");
    }
  }
}

void validate_buckets(const std::string& metric, const std::vector<double>& buckets) {
  if (buckets.empty()) {
    reject("histogram '" + metric + "' needs at least one bucket bound (+Inf is implicit)");
  }
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    if (!std::isfinite(buckets[i])) {
      reject("histogram '" + metric + "' has bucket bound " + format_value(buckets[i]) +
             ": bounds must be finite (+Inf is implicit)");
    }
    if (i > 0 && !(buckets[i - 1] < buckets[i])) {
      reject("histogram '" + metric + "' bucket bounds must be strictly ascending; " +
             format_value(buckets[i - 1]) + " is followed by " + format_value(buckets[i]));
    }
  }
}

}  // namespace

std::vector<double> exponential_buckets(double start, double factor, int count) {
  const std::string call = "exponential_buckets(" + format_value(start) + ", " + format_value(factor) + ", " +
                           std::to_string(count) + ")";
  if (!(start > 0) || !std::isfinite(start) || !(factor > 1) || !std::isfinite(factor) || count < 1) {
    reject(call + ": need start > 0, factor > 1, count >= 1");
  }
  std::vector<double> bounds;
  bounds.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    // Rounded to 15 significant digits so that le="1e-05" rather than
    // le="9.999999999999999e-06" (the product's binary rounding error).
    const double exact = start * std::pow(factor, i);
    char buf[32];
    const auto end = std::to_chars(buf, buf + sizeof buf, exact, std::chars_format::general, 15).ptr;
    double bound = exact;
    std::from_chars(buf, end, bound);
    if (!std::isfinite(bound) || (!bounds.empty() && !(bounds.back() < bound))) {
      reject(call + ": bound " + std::to_string(i) + " is not finite or not above the previous one");
    }
    bounds.push_back(bound);
  }
  return bounds;
}

// ---- Registry ----

template <typename Metric>
Family<Metric>& Registry::add(std::string name, std::string help, std::vector<std::string> label_names,
                              std::vector<double> buckets) {
  constexpr detail::Kind kind = detail::kind_of<Metric>();
  validate_name(kind, name);
  if (help.empty()) reject("metric '" + name + "' needs help text");
  validate_labels(name, label_names);
  if (kind == detail::Kind::kHistogram) validate_buckets(name, buckets);

  std::lock_guard lock(mu_);
  if (auto it = families_.find(name); it != families_.end()) {
    const detail::FamilyBase& existing = *it->second;
    std::string differs;
    if (existing.kind() != kind) {
      differs = std::string("type ") + kind_name(existing.kind());
    } else if (existing.label_names() != label_names) {
      differs = "labels (" + join_names(existing.label_names()) + ")";
    } else if (existing.help() != help) {
      differs = "other help text";
    } else if (existing.buckets() != buckets) {
      differs = "other bucket bounds";
    }
    if (!differs.empty()) {
      reject("metric '" + name + "' is already registered with " + differs + "; one name, one definition");
    }
    return static_cast<Family<Metric>&>(*it->second);
  }
  auto family = std::make_unique<Family<Metric>>(name, std::move(help), std::move(label_names), std::move(buckets));
  auto& ref = *family;
  families_.emplace(std::move(name), std::move(family));
  return ref;
}

CounterFamily& Registry::counter(std::string name, std::string help, std::vector<std::string> label_names) {
  return add<Counter>(std::move(name), std::move(help), std::move(label_names), {});
}

GaugeFamily& Registry::gauge(std::string name, std::string help, std::vector<std::string> label_names) {
  return add<Gauge>(std::move(name), std::move(help), std::move(label_names), {});
}

HistogramFamily& Registry::histogram(std::string name, std::string help, std::vector<double> buckets,
                                     std::vector<std::string> label_names) {
  return add<Histogram>(std::move(name), std::move(help), std::move(label_names), std::move(buckets));
}

std::string Registry::render() const {
  std::string out;
  std::lock_guard lock(mu_);
  for (const auto& [name, family] : families_) family->render(out);
  return out;
}

}  // namespace ringsync::metrics
