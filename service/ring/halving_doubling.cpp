#include "service/ring/halving_doubling.h"

#include <algorithm>
#include <cstdint>

#include "service/ring/arguments.h"
#include "service/ring/contribution.h"
#include "service/ring/partition.h"

namespace ringsync::service::ring {

namespace {

// log2 of the largest power of two <= n (n >= 1).
int floor_log2(int n) {
  int k = 0;
  while ((2 << k) <= n) ++k;
  return k;
}

// Blocks [first, last) of `count` elements cut into `blocks` blocks, as
// Partition cuts segments: the first count % blocks hold one element more.
Range blocks_range(std::size_t count, int blocks, int first, int last) {
  const auto p = static_cast<std::size_t>(blocks);
  const auto begin = [&](int b) {
    const auto i = static_cast<std::size_t>(b);
    return i * (count / p) + std::min(i, count % p);
  };
  return {begin(first), begin(last) - begin(first)};
}

}  // namespace

HalvingDoublingAllreduce::HalvingDoublingAllreduce(transport::Transport& transport, void* data,
                                                   std::size_t count, DType dtype, ReduceOp op,
                                                   std::size_t divisor, const RingOptions& options)
    : ChunkPipeline(transport, "halving-doubling allreduce", options.window, options.gate),
      data_(static_cast<std::byte*>(data)),
      count_(count),
      dtype_(dtype),
      op_(op),
      divisor_(divisor),
      options_(options) {}

std::size_t HalvingDoublingAllreduce::tag_steps(int nodes) {
  // Fold, log2(p) halving steps, log2(p) doubling steps, unfold.
  return 2 * static_cast<std::size_t>(floor_log2(std::max(nodes, 1))) + 2;
}

void HalvingDoublingAllreduce::plan_sends(int peer, std::size_t step, std::size_t begin,
                                          std::size_t count, std::size_t after_landed,
                                          bool own_input) {
  const std::size_t elem = dtype_size(dtype_);
  const auto tag_step = static_cast<std::uint16_t>(options_.first_step + step);
  for (std::size_t k = 0, at = 0; at < count; ++k, at += chunk_elements_) {
    const std::size_t n = std::min(chunk_elements_, count - at);
    plan_send({peer,
               transport::make_tag(options_.sequence, tag_step, static_cast<std::uint16_t>(k)),
               data_ + (begin + at) * elem, n * elem, after_landed, own_input});
  }
}

std::size_t HalvingDoublingAllreduce::plan_recvs(int peer, std::size_t step, std::size_t begin,
                                                 std::size_t count, bool via_scratch, bool final) {
  const std::size_t elem = dtype_size(dtype_);
  const auto tag_step = static_cast<std::uint16_t>(options_.first_step + step);
  std::size_t k = 0;
  for (std::size_t at = 0; at < count; ++k, at += chunk_elements_) {
    const std::size_t n = std::min(chunk_elements_, count - at);
    plan_recv({peer,
               transport::make_tag(options_.sequence, tag_step, static_cast<std::uint16_t>(k)),
               data_ + (begin + at) * elem, n * elem, via_scratch, final});
  }
  return k;
}

Status HalvingDoublingAllreduce::plan() {
  const int n = transport().size();
  const int r = transport().rank();
  Status valid = check_buffer(algorithm(), data_, count_, dtype_);
  if (valid.ok()) valid = check_reduction(algorithm(), op_, divisor_);
  if (valid.ok()) valid = check_options(algorithm(), options_, tag_steps(n));
  if (!valid.ok()) return valid;

  // Chunks of the requested size, raised so that the largest message (a
  // whole buffer, at the fold) needs at most kMaxChunks: a chunk number is
  // 16 bits of a tag.
  chunk_elements_ =
      std::max({chunk_elements(options_.chunk_bytes, dtype_),
                (count_ + Partition::kMaxChunks - 1) / Partition::kMaxChunks, std::size_t{1}});

  const int log_p = floor_log2(n);
  const int p = 1 << log_p;
  const int rem = n - p;
  const std::size_t fold_step = 0;
  const std::size_t unfold_step = tag_steps(n) - 1;

  if (n == 1) {
    finish_alone(data_, count_, dtype_, op_, divisor_, gate());
    return Status::Ok();
  }

  // 1. Fold: an odd node of the first 2*rem hands its buffer to the even node
  // below and waits for the result (step 4).
  if (r < 2 * rem && r % 2 == 1) {
    plan_sends(r - 1, fold_step, 0, count_, /*after_landed=*/0, /*own_input=*/true);
    plan_recvs(r - 1, unfold_step, 0, count_, /*via_scratch=*/false, /*final=*/true);
    return Status::Ok();
  }
  const bool folds = r < 2 * rem;  // an even node of the first 2*rem
  std::size_t planned_recvs = 0;   // receives planned so far
  if (folds) {
    planned_recvs += plan_recvs(r + 1, fold_step, 0, count_, /*via_scratch=*/true, /*final=*/false);
  }

  const int me = folds ? r / 2 : r - rem;  // this node's number among the p
  const auto node = [rem](int i) { return i < rem ? 2 * i : i + rem; };

  // 2. Reduce-scatter by recursive halving: blocks [lo, lo + 2d) are this
  // node's; it keeps the half holding block `me` and sends the other. Each
  // send waits for every receive before it (the half it sends was reduced at
  // the step before).
  std::size_t step = fold_step + 1;
  int lo = 0;
  for (int d = p / 2; d >= 1; d /= 2, ++step) {
    const int peer = node(me ^ d);
    const bool keep_lower = (me & d) == 0;
    const Range send =
        blocks_range(count_, p, keep_lower ? lo + d : lo, keep_lower ? lo + 2 * d : lo + d);
    const Range keep =
        blocks_range(count_, p, keep_lower ? lo : lo + d, keep_lower ? lo + d : lo + 2 * d);
    plan_sends(peer, step, send.begin, send.count, planned_recvs, /*own_input=*/d == p / 2);
    if (d == 1) owned_first_recv_ = planned_recvs;
    // The last halving step's receives complete block `me`: final.
    planned_recvs +=
        plan_recvs(peer, step, keep.begin, keep.count, /*via_scratch=*/true, /*final=*/d == 1);
    if (!keep_lower) lo += d;
  }
  owned_end_recv_ = planned_recvs;

  // 3. Allgather by recursive doubling: the d blocks from `own` on are this
  // node's; the peer's d blocks arrive straight into place. The first step's
  // receive lands where the last halving step's send read from: the peer
  // sends only after that send's data has reached it.
  for (int d = 1; d < p; d *= 2, ++step) {
    const int peer = node(me ^ d);
    const int own = me & ~(d - 1);
    const Range send = blocks_range(count_, p, own, own + d);
    const Range recv = blocks_range(count_, p, own ^ d, (own ^ d) + d);
    plan_sends(peer, step, send.begin, send.count, planned_recvs, /*own_input=*/false);
    planned_recvs +=
        plan_recvs(peer, step, recv.begin, recv.count, /*via_scratch=*/false, /*final=*/true);
  }

  // 4. Unfold: the result back to the odd node that folded into this one.
  if (folds) plan_sends(r + 1, unfold_step, 0, count_, planned_recvs, /*own_input=*/false);
  return Status::Ok();
}

void HalvingDoublingAllreduce::land(std::size_t index, const Recv& recv, const std::byte* scratch) {
  if (scratch == nullptr) return;  // arrived in place: a final result
  fold_contribution(recv.place, scratch, recv.bytes, dtype_, op_, divisor_,
                    index >= owned_first_recv_ && index < owned_end_recv_);
}

}  // namespace ringsync::service::ring
