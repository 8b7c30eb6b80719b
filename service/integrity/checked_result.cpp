#include "service/integrity/checked_result.h"

#include "service/integrity/checked_ranges.h"
#include "service/integrity/linear_sum.h"
#include "service/integrity/verdict.h"
#include "service/ring/allgather.h"

namespace ringsync::service::integrity {

CheckedResult::CheckedResult(transport::Transport& transport, std::unique_ptr<ring::Task> data, std::byte* result,
                             std::size_t result_bytes, const ring::RingOptions& options, CheckSpec spec,
                             std::shared_ptr<CheckOutcome> outcome)
    : transport_(transport),
      data_(std::move(data)),
      result_(result),
      result_bytes_(result_bytes),
      options_(options),
      spec_(std::move(spec)),
      outcome_(std::move(outcome)),
      words_(2 * static_cast<std::size_t>(transport.size()), 0) {}

CheckedResult::~CheckedResult() = default;

Status CheckedResult::post() {
  if (spec_.linear) input_sum_ = linear_sum(result_, result_bytes_ / dtype_size(spec_.dtype), spec_.dtype);
  return data_->post();
}

ring::TaskState CheckedResult::progress() {
  if (!exchange_) {
    const ring::TaskState state = data_->progress();
    if (state != ring::TaskState::kDone) return state;
    return start_exchange();
  }
  const ring::TaskState state = exchange_->progress();
  if (state == ring::TaskState::kInProgress) return state;
  if (state == ring::TaskState::kError) {
    if (status_.ok()) status_ = exchange_->status();
    return state;
  }
  std::vector<std::uint64_t> checks, input_sums;
  for (std::size_t n = 0; n < words_.size(); n += 2) {
    checks.push_back(words_[n]);
    input_sums.push_back(words_[n + 1]);
  }
  status_ = compare_results(checks, spec_.collective);
  if (status_.ok() && spec_.linear) {
    const std::uint64_t result_sum = linear_sum(result_, result_bytes_ / dtype_size(spec_.dtype), spec_.dtype);
    status_ = compare_linear(input_sums, result_sum, spec_.dtype, spec_.collective);
  }
  if (status_.ok()) return ring::TaskState::kDone;
  outcome_->mismatch = true;
  return ring::TaskState::kError;
}

ring::TaskState CheckedResult::start_exchange() {
  const std::vector<ByteRange> ranges = checked_ranges(spec_.mode, result_bytes_, options_.sequence);
  if (spec_.corrupt_first && !ranges.empty()) result_[ranges.front().begin] ^= std::byte{0x10};
  const auto self = 2 * static_cast<std::size_t>(transport_.rank());
  words_[self] = check_word(spec_.mode, result_digest(result_, ranges));
  words_[self + 1] = input_sum_;
  ring::RingOptions exchange = options_;
  exchange.first_step = kCheckFirstStep;
  exchange.gate = nullptr;   // the words are in their own buffer, whole
  exchange.input = nullptr;
  exchange_ = std::make_unique<ring::Allgather>(transport_, words_.data(), words_.size(), DType::kI64, exchange);
  status_ = exchange_->post();
  if (!status_.ok()) return ring::TaskState::kError;
  return progress();
}

void CheckedResult::abort(const Status& why) {
  if (exchange_) {
    exchange_->abort(why);
  } else {
    data_->abort(why);
  }
}

const Status& CheckedResult::status() const {
  if (!data_->status().ok()) return data_->status();
  if (!status_.ok()) return status_;
  return exchange_ ? exchange_->status() : status_;
}

}  // namespace ringsync::service::integrity
