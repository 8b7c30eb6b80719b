// ringsync-example-trainer: one trainer rank that exercises every collective and
// checks every result against what it computes itself from the known inputs of
// all ranks.
//
// Easiest: let the launcher start the daemons and the ranks,
//   ringsync launch --nodes 2 --slots 2 -- ringsync-example-trainer --steps 3
// or run one process per local rank r = 0..3 against a running ringsyncd:
//   export RINGSYNC_SOCKET=/tmp/rs.sock RINGSYNC_LOCAL_SIZE=4
//   RINGSYNC_LOCAL_RANK=r ringsync-example-trainer [--steps N]
//
// Prints one summary line and exits 0, or prints what was wrong and exits 1.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "ringsync/ringsync.hpp"

namespace {

using ringsync::bfloat16;

// ---- the inputs every rank contributes (known to all ranks) -----------------

// Multiples of 0.5 below 1000: every sum is exact in f32, in any order.
float f32_input(int rank, std::size_t i, int step) {
  return 0.5f * static_cast<float>(rank + 1) + static_cast<float>((i + step) % 7);
}
double f64_input(int rank, std::size_t i, int step) {
  return 1.25 * rank + 0.001 * static_cast<double>(i % 1000) + step;
}
std::int32_t i32_input(int rank, std::size_t i, int step) {
  return static_cast<std::int32_t>((i * 7919 + static_cast<std::size_t>(rank) * 104729 + step) %
                                   1000003) -
         500000;
}
std::int64_t i64_input(int rank, std::size_t i, int step) {
  return (std::int64_t{rank} + 1) * 1'000'000'000'000 + static_cast<std::int64_t>(i) + step;
}
std::uint8_t u8_input(int rank, std::size_t i, int step) {
  return static_cast<std::uint8_t>((i * 31 + static_cast<std::size_t>(rank) * 17 + step) % 256);
}
// Small integers: sums stay below 256, exact in bf16.
float bf16_input(int rank, std::size_t i, int step) {
  return static_cast<float>(rank % 4 + (i + step) % 3);
}

bfloat16 to_bf16(float f) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t rounded = bits + 0x7FFFu + ((bits >> 16) & 1u);  // nearest, ties to even
  return bfloat16{static_cast<std::uint16_t>(rounded >> 16)};
}
float from_bf16(bfloat16 b) { return std::bit_cast<float>(std::uint32_t{b.bits} << 16); }

// ---- checking ---------------------------------------------------------------

class Checker {
 public:
  Checker(int rank, int size) : rank_(rank), size_(size) {}

  // Compares got[i] with expected(i) for every element (within `tolerance`,
  // relative, for floating point). Records the first few differences.
  void tensor(const std::string& what, std::size_t count,
              const std::function<double(std::size_t)>& got,
              const std::function<double(std::size_t)>& expected, double tolerance = 0.0) {
    ++checked_;
    for (std::size_t i = 0; i < count; ++i) {
      const double g = got(i);
      const double e = expected(i);
      const bool ok =
          tolerance == 0.0 ? g == e : std::fabs(g - e) <= tolerance * std::max(1.0, std::fabs(e));
      if (!ok) {
        fail(what + ": element " + std::to_string(i) + " of " + std::to_string(count) + " is " +
             std::to_string(g) + ", expected " + std::to_string(e));
        return;
      }
    }
  }

  void fail(const std::string& message) {
    if (failures_.size() < 20) failures_.push_back(message);
    ++failed_;
  }

  int rank() const { return rank_; }
  int size() const { return size_; }
  int checked() const { return checked_; }
  int failed() const { return failed_; }
  const std::vector<std::string>& failures() const { return failures_; }

 private:
  int rank_;
  int size_;
  int checked_ = 0;
  int failed_ = 0;
  std::vector<std::string> failures_;
};

std::string tag(const std::string& base, std::size_t count, int step) {
  return base + "." + std::to_string(count) + ".step" + std::to_string(step);
}

// ---- the collectives --------------------------------------------------------

void allreduces(ringsync::Context& ctx, Checker& check, std::size_t n, int step) {
  const int rank = check.rank();
  const int size = check.size();

  // f32 sum, in place in shared memory (zero copy).
  auto f32 = ctx.alloc<float>(n);
  for (std::size_t i = 0; i < n; ++i) f32[i] = f32_input(rank, i, step);
  ctx.allreduce(tag("f32.sum.shared", n, step), f32, RS_SUM);
  check.tensor(
      tag("allreduce f32 sum (shared, in place)", n, step), n,
      [&](std::size_t i) { return f32[i]; },
      [&](std::size_t i) {
        float s = 0;
        for (int r = 0; r < size; ++r) s += f32_input(r, i, step);
        return s;
      });

  // f32 sum, plain vectors, out of place (staged).
  std::vector<float> f32_in(n), f32_out(n, -1.0f);
  for (std::size_t i = 0; i < n; ++i) f32_in[i] = f32_input(rank, i, step);
  ctx.allreduce(tag("f32.sum.vector", n, step), f32_in, f32_out, RS_SUM);
  check.tensor(
      tag("allreduce f32 sum (vector)", n, step), n, [&](std::size_t i) { return f32_out[i]; },
      [&](std::size_t i) {
        float s = 0;
        for (int r = 0; r < size; ++r) s += f32_input(r, i, step);
        return s;
      });
  check.tensor(
      tag("allreduce f32 sum leaves sendbuf alone", n, step), n,
      [&](std::size_t i) { return f32_in[i]; },
      [&](std::size_t i) { return f32_input(rank, i, step); });

  // f64 average, plain vector, in place.
  std::vector<double> f64(n);
  for (std::size_t i = 0; i < n; ++i) f64[i] = f64_input(rank, i, step);
  ctx.allreduce(tag("f64.avg.vector", n, step), f64, RS_AVG);
  check.tensor(
      tag("allreduce f64 avg (vector, in place)", n, step), n,
      [&](std::size_t i) { return f64[i]; },
      [&](std::size_t i) {
        double s = 0;
        for (int r = 0; r < size; ++r) s += f64_input(r, i, step);
        return s / size;
      },
      1e-12);

  // i32 max, shared memory, out of place: send and recv halves of one buffer.
  auto i32 = ctx.alloc<std::int32_t>(2 * n);
  for (std::size_t i = 0; i < n; ++i) i32[i] = i32_input(rank, i, step);
  ctx.allreduce(tag("i32.max.shared", n, step), std::span(i32.data(), n),
                std::span(i32.data() + n, n), RS_MAX);
  check.tensor(
      tag("allreduce i32 max (shared, out of place)", n, step), n,
      [&](std::size_t i) { return i32[n + i]; },
      [&](std::size_t i) {
        std::int32_t m = i32_input(0, i, step);
        for (int r = 1; r < size; ++r) m = std::max(m, i32_input(r, i, step));
        return static_cast<double>(m);
      });

  // bf16 sum, plain vector, in place.
  std::vector<bfloat16> bf16(n);
  for (std::size_t i = 0; i < n; ++i) bf16[i] = to_bf16(bf16_input(rank, i, step));
  ctx.allreduce(tag("bf16.sum.vector", n, step), bf16, RS_SUM);
  check.tensor(
      tag("allreduce bf16 sum (vector, in place)", n, step), n,
      [&](std::size_t i) { return from_bf16(bf16[i]); },
      [&](std::size_t i) {
        float s = 0;
        for (int r = 0; r < size; ++r) s += bf16_input(r, i, step);
        return s;
      });

  // i64 sum in shared memory from a plain vector (staged send, zero-copy recv).
  std::vector<std::int64_t> i64_in(n);
  for (std::size_t i = 0; i < n; ++i) i64_in[i] = i64_input(rank, i, step);
  auto i64 = ctx.alloc<std::int64_t>(n);
  ctx.allreduce(tag("i64.sum.mixed", n, step), i64_in, i64, RS_SUM);
  check.tensor(
      tag("allreduce i64 sum (vector into shared)", n, step), n,
      [&](std::size_t i) { return static_cast<double>(i64[i]); },
      [&](std::size_t i) {
        std::int64_t s = 0;
        for (int r = 0; r < size; ++r) s += i64_input(r, i, step);
        return static_cast<double>(s);
      });

  // u8 min, asynchronous, several in flight at once.
  std::vector<std::vector<std::uint8_t>> u8(3, std::vector<std::uint8_t>(n));
  std::vector<ringsync::Request> inflight;
  for (int k = 0; k < 3; ++k) {
    for (std::size_t i = 0; i < n; ++i) u8[k][i] = u8_input(rank, i, step + k);
    inflight.push_back(
        ctx.allreduce_async(tag("u8.min.async" + std::to_string(k), n, step), u8[k], RS_MIN));
  }
  for (int k = 2; k >= 0; --k) {
    inflight[k].wait();
    check.tensor(
        tag("allreduce u8 min (async #" + std::to_string(k) + ")", n, step), n,
        [&](std::size_t i) { return u8[k][i]; },
        [&](std::size_t i) {
          std::uint8_t m = u8_input(0, i, step + k);
          for (int r = 1; r < size; ++r) m = std::min(m, u8_input(r, i, step + k));
          return static_cast<double>(m);
        });
  }
}

void broadcasts(ringsync::Context& ctx, Checker& check, std::size_t n, int step) {
  const int rank = check.rank();
  const int root = (step + 1) % check.size();

  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = rank == root ? f32_input(root, i, step) : -7.0f;
  ctx.broadcast(tag("f32.bcast.vector", n, step), v, root);
  check.tensor(
      tag("broadcast f32 (vector) from rank " + std::to_string(root), n, step), n,
      [&](std::size_t i) { return v[i]; }, [&](std::size_t i) { return f32_input(root, i, step); });

  auto shared = ctx.alloc<std::int64_t>(n);
  for (std::size_t i = 0; i < n; ++i) shared[i] = rank == root ? i64_input(root, i, step) : -1;
  ctx.broadcast(tag("i64.bcast.shared", n, step), shared, root);
  check.tensor(
      tag("broadcast i64 (shared) from rank " + std::to_string(root), n, step), n,
      [&](std::size_t i) { return static_cast<double>(shared[i]); },
      [&](std::size_t i) { return static_cast<double>(i64_input(root, i, step)); });
}

void allgathers(ringsync::Context& ctx, Checker& check, std::size_t n, int step) {
  const int rank = check.rank();
  const auto size = static_cast<std::size_t>(check.size());
  auto expected_i32 = [&](std::size_t j) {
    return static_cast<double>(i32_input(static_cast<int>(j / n), j % n, step));
  };

  // Plain vectors.
  std::vector<std::int32_t> mine(n), all(n * size, -1);
  for (std::size_t i = 0; i < n; ++i) mine[i] = i32_input(rank, i, step);
  ctx.allgather(tag("i32.gather.vector", n, step), mine, all);
  check.tensor(
      tag("allgather i32 (vector)", n, step), n * size, [&](std::size_t j) { return all[j]; },
      expected_i32);

  // In place in shared memory: this rank's slot already holds its contribution.
  auto gathered = ctx.alloc<std::int32_t>(n * size);
  for (std::size_t j = 0; j < n * size; ++j) gathered[j] = -1;
  std::span<std::int32_t> slot(gathered.data() + rank * n, n);
  for (std::size_t i = 0; i < n; ++i) slot[i] = i32_input(rank, i, step);
  ctx.allgather(tag("i32.gather.shared", n, step), slot, gathered);
  check.tensor(
      tag("allgather i32 (shared, in place)", n, step), n * size,
      [&](std::size_t j) { return gathered[j]; }, expected_i32);

  // In place in a plain vector.
  std::vector<std::int32_t> plain(n * size, -1);
  for (std::size_t i = 0; i < n; ++i) plain[rank * n + i] = i32_input(rank, i, step);
  ctx.allgather(tag("i32.gather.inplace", n, step), std::span(plain.data() + rank * n, n), plain);
  check.tensor(
      tag("allgather i32 (vector, in place)", n, step), n * size,
      [&](std::size_t j) { return plain[j]; }, expected_i32);
}

int usage(const char* program) {
  std::fprintf(stderr,
               "usage: %s [--steps N]\n"
               "Runs as one local rank of a job against ringsyncd; rank, size, socket and job\n"
               "come from RINGSYNC_LOCAL_RANK, RINGSYNC_LOCAL_SIZE, RINGSYNC_SOCKET and\n"
               "RINGSYNC_JOB_ID.\n",
               program);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 2;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--steps") == 0 && i + 1 < argc) {
      steps = std::atoi(argv[++i]);
      if (steps < 1) return usage(argv[0]);
    } else {
      return usage(argv[0]);
    }
  }

  int rank = -1;
  try {
    ringsync::Context ctx;
    // Global rank and size: on a multi-node job (ringsync launch --nodes N) the
    // collectives span every node's ranks.
    rank = ctx.rank();
    Checker check(rank, ctx.size());
    // Sizes: single elements, odd counts, nothing at all, and more than a staging class.
    const std::size_t counts[] = {1, 3, 0, 1000, 70001, 1 << 20};
    for (int step = 0; step < steps; ++step) {
      for (std::size_t n : counts) {
        allreduces(ctx, check, n, step);
        broadcasts(ctx, check, n, step);
        allgathers(ctx, check, n, step);
      }
      ctx.barrier("step" + std::to_string(step));
    }
    if (check.failed() > 0) {
      for (const std::string& f : check.failures())
        std::fprintf(stderr, "ringsync-example-trainer: rank %d: %s\n", rank, f.c_str());
      std::fprintf(stderr, "ringsync-example-trainer: rank %d/%d: %d of %d checks FAILED\n", rank,
                   check.size(), check.failed(), check.checked());
      return 1;
    }
    std::printf("ringsync-example-trainer: rank %d/%d: all %d results correct (%d steps)\n", rank,
                check.size(), check.checked(), steps);
    return 0;
  } catch (const std::exception& e) {
    if (rank < 0)
      std::fprintf(stderr, "ringsync-example-trainer: %s\n", e.what());
    else
      std::fprintf(stderr, "ringsync-example-trainer: rank %d: %s\n", rank, e.what());
    return 1;
  }
}
