#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "service/negotiation/inline_allreduce.h"

namespace test_service_negotiation_inline_allreduce {

using namespace ringsync;
using namespace ringsync::service;
using namespace ringsync::service::negotiation;

namespace {

// A ready collective of `ranks` local ranks over the given buffers.
local::PendingCollective ready(wire::CollectiveKind kind, DType dtype, ReduceOp op, std::size_t count,
                        std::vector<collective::Contribution> where) {
  local::PendingCollective p;
  p.name.assign(1, 't');
  for (std::uint32_t r = 0; r < where.size(); ++r) {
    local::Submission s;
    s.local_rank = r;
    s.request.kind = kind;
    s.request.dtype = dtype;
    s.request.op = op;
    s.request.count = count;
    s.where = where[r];
    p.submissions.push_back(std::move(s));
    p.present.push_back(true);
  }
  return p;
}

std::vector<float> floats(const std::vector<std::uint8_t>& bytes) {
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

}  // namespace

TEST_CASE("local reduction of a small allreduce: the ranks summed (avg too), min, max, prod") {
  std::vector<float> a{1, -2, 3}, b{4, 5, -6}, out_a(3), out_b(3);
  std::vector<collective::Contribution> where{{reinterpret_cast<const std::byte*>(a.data()), reinterpret_cast<std::byte*>(out_a.data())},
                                  {reinterpret_cast<const std::byte*>(b.data()), reinterpret_cast<std::byte*>(out_b.data())}};
  auto sum = local_reduction(ready(wire::CollectiveKind::kAllreduce, DType::kF32, ReduceOp::kSum, 3, where), 64);
  REQUIRE(sum);
  CHECK(floats(*sum) == std::vector<float>{5, 3, -3});
  // avg: the node sums, the coordinator divides by the job's ranks.
  auto avg = local_reduction(ready(wire::CollectiveKind::kAllreduce, DType::kF32, ReduceOp::kAvg, 3, where), 64);
  REQUIRE(avg);
  CHECK(floats(*avg) == std::vector<float>{5, 3, -3});
  auto min = local_reduction(ready(wire::CollectiveKind::kAllreduce, DType::kF32, ReduceOp::kMin, 3, where), 64);
  REQUIRE(min);
  CHECK(floats(*min) == std::vector<float>{1, -2, -6});
  auto prod = local_reduction(ready(wire::CollectiveKind::kAllreduce, DType::kF32, ReduceOp::kProd, 3, where), 64);
  REQUIRE(prod);
  CHECK(floats(*prod) == std::vector<float>{4, -10, -18});
}

TEST_CASE("only small host allreduces are reduced for the plan") {
  std::vector<float> a(4, 1.0f), out(4);
  std::vector<collective::Contribution> one{{reinterpret_cast<const std::byte*>(a.data()), reinterpret_cast<std::byte*>(out.data())}};
  CHECK(local_reduction(ready(wire::CollectiveKind::kAllreduce, DType::kF32, ReduceOp::kSum, 4, one), 16));
  CHECK_FALSE(local_reduction(ready(wire::CollectiveKind::kAllreduce, DType::kF32, ReduceOp::kSum, 4, one), 15));
  CHECK_FALSE(local_reduction(ready(wire::CollectiveKind::kAllreduce, DType::kF32, ReduceOp::kSum, 4, one), 0));
  CHECK_FALSE(local_reduction(ready(wire::CollectiveKind::kBroadcast, DType::kF32, ReduceOp::kSum, 4, one), 64));
  CHECK_FALSE(local_reduction(ready(wire::CollectiveKind::kAllreduce, DType::kF32, ReduceOp::kSum, 0, one), 64));
  auto device = ready(wire::CollectiveKind::kAllreduce, DType::kF32, ReduceOp::kSum, 4, one);
  device.submissions[0].request.memory = wire::Memory::kDevice;
  CHECK_FALSE(local_reduction(device, 64));
  // A rank without a send buffer (staged GPU data) leaves it to the ring.
  auto empty = ready(wire::CollectiveKind::kAllreduce, DType::kF32, ReduceOp::kSum, 4, {{nullptr, nullptr}});
  CHECK_FALSE(local_reduction(empty, 64));
}

TEST_CASE("the plan's result reaches every rank's receive buffer, or none when its size is wrong") {
  std::vector<float> in(2, 0.0f), out0(2, -1.0f), out1(2, -1.0f);
  std::vector<collective::Contribution> where{{reinterpret_cast<const std::byte*>(in.data()), reinterpret_cast<std::byte*>(out0.data())},
                                  {reinterpret_cast<const std::byte*>(in.data()), reinterpret_cast<std::byte*>(out1.data())}};
  auto p = ready(wire::CollectiveKind::kAllreduce, DType::kF32, ReduceOp::kSum, 2, where);
  std::vector<float> result{7.5f, -1.25f};
  std::vector<std::uint8_t> bytes(sizeof(float) * 2);
  std::memcpy(bytes.data(), result.data(), bytes.size());
  Status wrong = copy_result(p, std::span(bytes).first(4));
  CHECK(wrong.code() == StatusCode::kInternal);
  CHECK(wrong.message() == "the plan's result for tensor 't' has 4 bytes, the tensor 8");
  CHECK(out0 == std::vector<float>{-1, -1});
  REQUIRE(copy_result(p, bytes).ok());
  CHECK(out0 == result);
  CHECK(out1 == result);
}

}  // namespace test_service_negotiation_inline_allreduce
