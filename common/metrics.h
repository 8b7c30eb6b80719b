// In-house Prometheus exposition (text format 0.0.4): a registry of metric
// families with fixed label names; children are created on demand from label
// values and updated lock-free (counters, gauges) or under a tiny per-series
// lock (histograms) from hot paths.
//
// Contract violations throw std::invalid_argument with a message that names the
// metric and the rule: an invalid or reserved name, a counter without `_total`,
// re-registering a name with another type/help/labels/buckets, bad histogram
// buckets, the wrong number of label values, a negative counter increment.
// These are fixed by the calling code, not by input, so the first test that runs
// the code path finds them. Label *values* are free-form runtime data: any
// string is accepted and rendered safely (escaped; invalid UTF-8 replaced).
//
// Names are held to what `promtool check metrics` accepts without lint
// findings: snake_case ([a-z_][a-z0-9_]*), no ':' (reserved for recording
// rules), counters end in `_total` and nothing else does, no family ends in
// `_bucket`/`_sum`/`_count` (a histogram's sample suffixes), label names
// `le`/`quantile` and `__*` are reserved. Unit naming (base units: `_seconds`,
// `_bytes`, `_ratio`) and keeping type words out of names are the author's job.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace ringsync::metrics {

// Content-Type of the exposition, for the HTTP response.
inline constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

// `count` bounds start, start*factor, start*factor^2, ..., each rounded to 15
// significant digits so that le labels read "1e-05", not "9.999999999999999e-06".
// Needs start > 0, factor > 1, count >= 1 and finite bounds.
std::vector<double> exponential_buckets(double start, double factor, int count);

// ---- Series (one child of a family, i.e. one set of label values) ----

// Misuse at run time (a negative or NaN increment, the wrong number of label
// values) is a bug in the caller, but must never end a daemon serving jobs:
// it is ignored, counted here, and its first description kept for the log.
// (Registering a family with a bad name or buckets still throws: that
// happens once, at start-up, where main reports it.)
std::uint64_t misuse_count();
std::string first_misuse();

class Counter {
 public:
  // amount must be >= 0 (not NaN); a counter only goes up. Anything else is
  // ignored and counted (misuse_count()).
  void inc(double amount = 1.0);
  double value() const { return value_.load(std::memory_order_relaxed); }
  void reset() { value_.store(0.0, std::memory_order_relaxed); }  // when its series is removed

 private:
  std::atomic<double> value_{0.0};
};

class Gauge {
 public:
  void set(double v) { value_.store(v, std::memory_order_relaxed); }
  void inc(double amount = 1.0) { value_.fetch_add(amount, std::memory_order_relaxed); }
  void dec(double amount = 1.0) { value_.fetch_sub(amount, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }
  void reset() { set(0.0); }

 private:
  std::atomic<double> value_{0.0};
};

class Histogram {
 public:
  // A consistent view: cumulative[i] counts observations <= bounds[i];
  // cumulative.back() is the +Inf bucket and equals count.
  struct Snapshot {
    std::vector<std::uint64_t> cumulative;  // bounds.size() + 1 entries
    double sum = 0.0;
    std::uint64_t count = 0;
  };

  // `bounds` (validated, ascending) must outlive the histogram; families own theirs.
  explicit Histogram(const std::vector<double>& bounds);
  // NaN lands in the +Inf bucket and makes the sum NaN (as client_golang does).
  void observe(double v);
  Snapshot snapshot() const;
  const std::vector<double>& bounds() const { return bounds_; }
  void reset();

 private:
  const std::vector<double>& bounds_;  // owned by the family, which outlives us
  mutable std::mutex mu_;
  std::vector<std::uint64_t> per_bucket_;  // not cumulative; last = (bounds.back(), +Inf)
  double sum_ = 0.0;
};

// ---- Families ----

namespace detail {

enum class Kind { kCounter, kGauge, kHistogram };
const char* kind_name(Kind kind);  // "counter", "gauge", "histogram"
std::string join_names(const std::vector<std::string>& names);  // "a, b"

// What the registry knows about every family, whatever its series type.
class FamilyBase {
 public:
  FamilyBase(Kind kind, std::string name, std::string help, std::vector<std::string> label_names,
             std::vector<double> buckets);
  virtual ~FamilyBase() = default;
  FamilyBase(const FamilyBase&) = delete;
  FamilyBase& operator=(const FamilyBase&) = delete;

  Kind kind() const { return kind_; }
  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& label_names() const { return label_names_; }
  const std::vector<double>& buckets() const { return buckets_; }
  // Appends HELP, TYPE and every visible series.
  void render(std::string& out) const;

 protected:
  virtual void render_series(std::string& out) const = 0;
  // Whether `n` == label_names().size(); otherwise counts a misuse.
  bool check_label_count(std::size_t n) const;

 private:
  Kind kind_;
  std::string name_;
  std::string help_;
  std::vector<std::string> label_names_;
  std::vector<double> buckets_;  // histograms only
};

template <typename Metric>
constexpr Kind kind_of() {
  if constexpr (std::is_same_v<Metric, Counter>) return Kind::kCounter;
  if constexpr (std::is_same_v<Metric, Gauge>) return Kind::kGauge;
  return Kind::kHistogram;
}

// Orders label-value tuples of any string-like element type together.
struct LabelValuesLess {
  using is_transparent = void;
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(),
                                        [](std::string_view x, std::string_view y) { return x < y; });
  }
};

}  // namespace detail

// A metric family: one name, fixed label names, one series per label-value tuple.
//
// with(values) returns the series for those values, creating it on first use.
// The reference stays valid for the registry's lifetime, also across remove() and
// clear(): those hide a series from the exposition and zero it, and the next
// with() of the same values shows it again. Cache the reference on hot paths;
// with() itself takes a shared lock and one map lookup.
// A family without labels has its single series from the start (it renders 0).
template <typename Metric>
class Family : public detail::FamilyBase {
 public:
  // Use Registry to make families; the arguments are validated there.
  Family(std::string name, std::string help, std::vector<std::string> label_names,
         std::vector<double> buckets);

  // The wrong number of label values counts a misuse and returns a series
  // that is never exposed.
  Metric& with(std::initializer_list<std::string_view> label_values = {});
  Metric& with(std::span<const std::string> label_values);
  // Hides one series; returns false if it was not visible (or the number of
  // label values is wrong).
  bool remove(std::initializer_list<std::string_view> label_values);
  bool remove(std::span<const std::string> label_values);
  // Hides every series (for a family without labels: its single series).
  void clear();
  // Deletes every series whose label `label` has `value` (a job that ended):
  // unlike remove(), the memory goes too, so references to those series
  // must not be kept. Returns how many went.
  std::size_t erase_where(std::string_view label, std::string_view value);
  // Number of visible series.
  std::size_t size() const;

 private:
  struct Series {
    template <typename... Args>
    explicit Series(const Args&... args) : metric(args...) {}
    Metric metric;
    bool visible = true;  // guarded by the family's mutex
  };

  std::unique_ptr<Series> make_series() const;
  template <typename Values>
  Metric& with_impl(const Values& values);
  template <typename Values>
  bool remove_impl(const Values& values);
  void render_series(std::string& out) const override;

  mutable std::shared_mutex mu_;
  std::map<std::vector<std::string>, std::unique_ptr<Series>, detail::LabelValuesLess> series_;
  std::unique_ptr<Series> discarded_ = make_series();  // what misuse writes to
};

using CounterFamily = Family<Counter>;
using GaugeFamily = Family<Gauge>;
using HistogramFamily = Family<Histogram>;

extern template class Family<Counter>;
extern template class Family<Gauge>;
extern template class Family<Histogram>;

// ---- Registry ----

// Thread-safe. Registering the same name again with the same type, help, labels
// (and buckets) returns the existing family; anything else that clashes throws.
class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  CounterFamily& counter(std::string name, std::string help, std::vector<std::string> label_names = {});
  GaugeFamily& gauge(std::string name, std::string help, std::vector<std::string> label_names = {});
  // buckets: finite, strictly ascending, at least one; +Inf is implicit.
  HistogramFamily& histogram(std::string name, std::string help, std::vector<double> buckets,
                             std::vector<std::string> label_names = {});

  // Text format 0.0.4: families sorted by name, series sorted by label values.
  // Families without visible series still emit HELP and TYPE.
  std::string render() const;

 private:
  template <typename Metric>
  Family<Metric>& add(std::string name, std::string help, std::vector<std::string> label_names,
                      std::vector<double> buckets);

  // The suffix rules keep sample names of different families apart (only a
  // histogram renders `_bucket`/`_sum`/`_count`, only counters end in `_total`),
  // so equal family names are the only clash to check.
  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<detail::FamilyBase>, std::less<>> families_;
};

// ---- Text-format building blocks (exposed for tests and other exporters) ----

// A value Go's strconv.ParseFloat reads back exactly: integers below 2^53 without
// exponent, "+Inf", "-Inf", "NaN", otherwise the shortest round-trip form.
std::string format_value(double v);
void append_value(std::string& out, double v);
// HELP text: `\` -> `\\`, newline -> `\n`; invalid UTF-8 -> U+FFFD.
void append_escaped_help(std::string& out, std::string_view text);
// Label value: additionally `"` -> `\"`.
void append_escaped_label_value(std::string& out, std::string_view value);
// snake_case: [a-z_][a-z0-9_]*. Suffix rules depend on the type and are
// checked at registration.
bool is_valid_metric_name(std::string_view name);
// snake_case and not reserved (`__*`, `le`, `quantile`).
bool is_valid_label_name(std::string_view name);

}  // namespace ringsync::metrics
