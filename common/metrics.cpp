// Series and families of the Prometheus exposition: updates and rendering.
#include "common/metrics.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <mutex>
#include <stdexcept>

namespace ringsync::metrics {

namespace detail {

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kCounter: return "counter";
    case Kind::kGauge: return "gauge";
    case Kind::kHistogram: return "histogram";
  }
  return "untyped";
}

std::string join_names(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty()) out += ", ";
    out += p;
  }
  return out;
}

}  // namespace detail

namespace {

// `{a="x",b="y"}`, with an optional trailing `le` pair; nothing if no labels.
void append_labels(std::string& out, const std::vector<std::string>& names,
                   const std::vector<std::string>& values, std::string_view le = {}) {
  if (names.empty() && le.empty()) return;
  out += '{';
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += ',';
    out += names[i];
    out += "=\"";
    append_escaped_label_value(out, values[i]);
    out += '"';
  }
  if (!le.empty()) {
    if (!names.empty()) out += ',';
    out += "le=\"";
    out += le;
    out += '"';
  }
  out += '}';
}

void append_sample(std::string& out, std::string_view name, std::string_view suffix,
                   const std::vector<std::string>& label_names, const std::vector<std::string>& values,
                   double value, std::string_view le = {}) {
  out += name;
  out += suffix;
  append_labels(out, label_names, values, le);
  out += ' ';
  append_value(out, value);
  out += '\n';
}

std::atomic<std::uint64_t> g_misuse{0};
std::mutex g_misuse_mu;
std::string g_first_misuse;

void misuse(const std::string& what) {
  if (g_misuse.fetch_add(1, std::memory_order_relaxed) != 0) return;
  std::lock_guard lock(g_misuse_mu);
  g_first_misuse = what;
}

}  // namespace

std::uint64_t misuse_count() { return g_misuse.load(std::memory_order_relaxed); }

std::string first_misuse() {
  std::lock_guard lock(g_misuse_mu);
  return g_first_misuse;
}

// ---- Series ----

void Counter::inc(double amount) {
  if (!(amount >= 0)) {
    misuse("a counter only goes up: increment by " + format_value(amount) + " was ignored");
    return;
  }
  value_.fetch_add(amount, std::memory_order_relaxed);
}

Histogram::Histogram(const std::vector<double>& bounds) : bounds_(bounds), per_bucket_(bounds.size() + 1, 0) {}

void Histogram::observe(double v) {
  // First bound >= v; NaN (unordered) belongs to +Inf.
  const std::size_t bucket =
      std::isnan(v) ? bounds_.size()
                    : static_cast<std::size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  std::lock_guard lock(mu_);
  ++per_bucket_[bucket];
  sum_ += v;
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot snap;
  snap.cumulative.reserve(per_bucket_.size());
  std::lock_guard lock(mu_);
  std::uint64_t running = 0;
  for (std::uint64_t n : per_bucket_) {
    running += n;
    snap.cumulative.push_back(running);
  }
  snap.sum = sum_;
  snap.count = running;
  return snap;
}

void Histogram::reset() {
  std::lock_guard lock(mu_);
  std::fill(per_bucket_.begin(), per_bucket_.end(), 0);
  sum_ = 0.0;
}

// ---- FamilyBase ----

namespace detail {

FamilyBase::FamilyBase(Kind kind, std::string name, std::string help, std::vector<std::string> label_names,
                       std::vector<double> buckets)
    : kind_(kind),
      name_(std::move(name)),
      help_(std::move(help)),
      label_names_(std::move(label_names)),
      buckets_(std::move(buckets)) {}

void FamilyBase::render(std::string& out) const {
  out += "# HELP ";
  out += name_;
  out += ' ';
  append_escaped_help(out, help_);
  out += "\n# TYPE ";
  out += name_;
  out += ' ';
  out += detail::kind_name(kind_);
  out += '\n';
  render_series(out);
}

bool FamilyBase::check_label_count(std::size_t n) const {
  if (n == label_names_.size()) return true;
  misuse("metric '" + name_ + "' takes " + std::to_string(label_names_.size()) + " label value(s) (" +
         join_names(label_names_) + "), got " + std::to_string(n));
  return false;
}

}  // namespace detail

// ---- Family ----

template <typename Metric>
std::unique_ptr<typename Family<Metric>::Series> Family<Metric>::make_series() const {
  if constexpr (std::is_same_v<Metric, Histogram>) {
    return std::make_unique<Series>(buckets());
  } else {
    return std::make_unique<Series>();
  }
}

template <typename Metric>
Family<Metric>::Family(std::string name, std::string help, std::vector<std::string> label_names,
                       std::vector<double> buckets)
    : FamilyBase(detail::kind_of<Metric>(), std::move(name), std::move(help), std::move(label_names), std::move(buckets)) {
  // A family without labels is a single series that exists from the start.
  if (this->label_names().empty()) series_.emplace(std::vector<std::string>{}, make_series());
}

template <typename Metric>
template <typename Values>
Metric& Family<Metric>::with_impl(const Values& values) {
  if (!check_label_count(values.size())) return discarded_->metric;
  {
    std::shared_lock lock(mu_);
    auto it = series_.find(values);
    if (it != series_.end() && it->second->visible) return it->second->metric;
  }
  std::unique_lock lock(mu_);
  auto it = series_.find(values);
  if (it == series_.end()) {
    it = series_.emplace(std::vector<std::string>(values.begin(), values.end()), make_series()).first;
  } else if (!it->second->visible) {
    it->second->metric.reset();  // drop whatever stale references wrote while hidden
    it->second->visible = true;
  }
  return it->second->metric;
}

template <typename Metric>
template <typename Values>
bool Family<Metric>::remove_impl(const Values& values) {
  if (!check_label_count(values.size())) return false;
  std::unique_lock lock(mu_);
  auto it = series_.find(values);
  if (it == series_.end() || !it->second->visible) return false;
  it->second->visible = false;
  it->second->metric.reset();
  return true;
}

template <typename Metric>
Metric& Family<Metric>::with(std::initializer_list<std::string_view> label_values) {
  return with_impl(label_values);
}

template <typename Metric>
Metric& Family<Metric>::with(std::span<const std::string> label_values) {
  return with_impl(label_values);
}

template <typename Metric>
bool Family<Metric>::remove(std::initializer_list<std::string_view> label_values) {
  return remove_impl(label_values);
}

template <typename Metric>
bool Family<Metric>::remove(std::span<const std::string> label_values) {
  return remove_impl(label_values);
}

template <typename Metric>
void Family<Metric>::clear() {
  std::unique_lock lock(mu_);
  for (auto& [values, series] : series_) {
    series->visible = false;
    series->metric.reset();
  }
}

template <typename Metric>
std::size_t Family<Metric>::erase_where(std::string_view label, std::string_view value) {
  const auto& names = label_names();
  const auto at = std::find(names.begin(), names.end(), label);
  if (at == names.end()) return 0;
  const std::size_t index = static_cast<std::size_t>(at - names.begin());
  std::unique_lock lock(mu_);
  return std::erase_if(series_, [&](const auto& entry) { return entry.first[index] == value; });
}

template <typename Metric>
std::size_t Family<Metric>::size() const {
  std::shared_lock lock(mu_);
  std::size_t n = 0;
  for (const auto& [values, series] : series_) n += series->visible ? 1 : 0;
  return n;
}

template <typename Metric>
void Family<Metric>::render_series(std::string& out) const {
  std::shared_lock lock(mu_);
  for (const auto& [values, series] : series_) {
    if (!series->visible) continue;
    if constexpr (std::is_same_v<Metric, Histogram>) {
      const Histogram::Snapshot snap = series->metric.snapshot();
      const auto& bounds = buckets();
      for (std::size_t i = 0; i < bounds.size(); ++i) {
        append_sample(out, name(), "_bucket", label_names(), values, static_cast<double>(snap.cumulative[i]),
                      format_value(bounds[i]));
      }
      append_sample(out, name(), "_bucket", label_names(), values, static_cast<double>(snap.cumulative.back()),
                    "+Inf");
      append_sample(out, name(), "_sum", label_names(), values, snap.sum);
      append_sample(out, name(), "_count", label_names(), values, static_cast<double>(snap.count));
    } else {
      append_sample(out, name(), "", label_names(), values, series->metric.value());
    }
  }
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

}  // namespace ringsync::metrics
