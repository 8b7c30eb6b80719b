// negotiation-bench: one trainer rank of a job whose steps are many small allreduces,
// so that the step time is mostly negotiation (ready report, plan, ring start-up)
// rather than data movement.
//
//   negotiation-bench [--steps N] [--tensors T] [--bytes B] [--warmup W] [--timeout-ms MS]
//
// Run one per rank, with the environment of any trainer (RINGSYNC_SOCKET,
// RINGSYNC_JOB_ID, RINGSYNC_LOCAL_RANK, RINGSYNC_LOCAL_SIZE). Each step submits T
// f32 sum allreduces named "t0".."t{T-1}" (the same names every step, so from the
// second step on they are repeats the response cache can announce as bits), waits
// for all of them, and checks every element. Rank 0 prints the median and p90 step
// time and the median step time per tensor, then one RESULT line for scripts
// (bench/negotiation.sh). Exit codes: 0 ok, 1 a wrong result, 2 usage, 3 connect
// failed, 4 a collective failed or did not finish within --timeout-ms.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "ringsync/ringsync.h"

namespace {

struct Options {
  int steps = 200;
  int tensors = 16;
  std::size_t bytes = 32;  // per tensor: 8 floats
  int warmup = 20;
  int timeout_ms = 30000;  // per wait: a stuck job ends the run instead of hanging it
};

void print_usage(std::FILE* to) {
  std::fprintf(to,
               "usage: negotiation-bench [--steps N] [--tensors T] [--bytes B] [--warmup W]\n"
               "                         [--timeout-ms MS]\n"
               "  --steps N       timed steps; default 200\n"
               "  --tensors T     allreduces per step, named t0..t{T-1}; default 16\n"
               "  --bytes B       bytes per tensor, a multiple of 4 (f32); default 32\n"
               "  --warmup W      untimed steps first; default 20\n"
               "  --timeout-ms MS longest wait for one allreduce; default 30000\n");
}

bool parse_int(const char* text, long long min, long long* out) {
  char* end = nullptr;
  const long long value = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || value < min) return false;
  *out = value;
  return true;
}

bool parse_options(int argc, char** argv, Options* options) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      print_usage(stdout);
      std::exit(0);
    }
    long long value = 0;
    const bool has_value = i + 1 < argc;
    if (arg == "--steps" && has_value && parse_int(argv[++i], 1, &value)) {
      options->steps = static_cast<int>(value);
    } else if (arg == "--tensors" && has_value && parse_int(argv[++i], 1, &value)) {
      options->tensors = static_cast<int>(value);
    } else if (arg == "--bytes" && has_value && parse_int(argv[++i], 4, &value) && value % 4 == 0) {
      options->bytes = static_cast<std::size_t>(value);
    } else if (arg == "--warmup" && has_value && parse_int(argv[++i], 0, &value)) {
      options->warmup = static_cast<int>(value);
    } else if (arg == "--timeout-ms" && has_value && parse_int(argv[++i], 1, &value)) {
      options->timeout_ms = static_cast<int>(value);
    } else {
      std::fprintf(stderr, "negotiation-bench: bad or incomplete argument '%s'\n", argv[i]);
      print_usage(stderr);
      return false;
    }
  }
  return true;
}

// Small integers, so every sum over ranks is exact in f32 and any mix-up of
// tensor, element, step or rank shows as a wrong value.
float value_of(int rank, int tensor, std::size_t element, int step) {
  return static_cast<float>((rank + 3 * tensor + static_cast<int>(element % 97) + step) % 11 + 1);
}

double percentile(std::vector<double> values, double fraction) {
  std::sort(values.begin(), values.end());
  // Nearest rank: the smallest value with at least `fraction` of them at or below it.
  const double n = static_cast<double>(values.size());
  const auto rank = static_cast<std::size_t>(std::ceil(fraction * n));
  return values[std::clamp<std::size_t>(rank, 1, values.size()) - 1];
}

class Bench {
 public:
  Bench(const Options& options, rs_context_t* ctx, float* send, float* recv)
      : options_(options), ctx_(ctx), send_(send), recv_(recv),
        count_(options.bytes / sizeof(float)), rank_(rs_rank(ctx)), size_(rs_size(ctx)) {
    // append(), not "t" + to_string(): g++ 12 warns falsely (-Wrestrict) on the latter.
    for (int t = 0; t < options_.tensors; ++t)
      names_.push_back(std::string("t").append(std::to_string(t)));
    requests_.resize(static_cast<std::size_t>(options_.tensors));
  }

  // One step: submit every tensor, then wait for all. Returns the exit code.
  int step(int step, double* seconds) {
    for (int t = 0; t < options_.tensors; ++t)
      for (std::size_t e = 0; e < count_; ++e) send_[offset(t) + e] = value_of(rank_, t, e, step);
    std::fill(recv_, recv_ + count_ * static_cast<std::size_t>(options_.tensors), -1.0f);

    const auto start = std::chrono::steady_clock::now();
    for (int t = 0; t < options_.tensors; ++t) {
      const rs_status_t s = rs_allreduce_async(ctx_, names_[t].c_str(), send_ + offset(t),
                                               recv_ + offset(t), count_, RS_F32, RS_SUM,
                                               &requests_[t]);
      if (s != RS_SUCCESS) return fail("submitting", t, step, s);
    }
    int code = 0;
    for (int t = 0; t < options_.tensors; ++t) {
      const rs_status_t s = rs_wait_timeout(requests_[t], options_.timeout_ms);
      if (s == RS_IN_PROGRESS) rs_request_free(requests_[t]);
      if (s != RS_SUCCESS && code == 0) code = fail("waiting for", t, step, s);
    }
    *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return code != 0 ? code : check(step);
  }

 private:
  std::size_t offset(int tensor) const { return static_cast<std::size_t>(tensor) * count_; }

  int check(int step) const {
    for (int t = 0; t < options_.tensors; ++t) {
      for (std::size_t e = 0; e < count_; ++e) {
        float want = 0;
        for (int r = 0; r < size_; ++r) want += value_of(r, t, e, step);
        const float got = recv_[offset(t) + e];
        if (got != want) {
          std::fprintf(stderr,
                       "negotiation-bench: rank %d step %d: %s[%zu] is %g, want %g (the sum over "
                       "%d ranks)\n",
                       rank_, step, names_[t].c_str(), e, static_cast<double>(got),
                       static_cast<double>(want), size_);
          return 1;
        }
      }
    }
    return 0;
  }

  int fail(const char* what, int tensor, int step, rs_status_t s) const {
    std::fprintf(stderr, "negotiation-bench: rank %d step %d: %s %s: %s%s%s\n", rank_, step, what,
                 names_[tensor].c_str(), rs_status_string(s),
                 s == RS_IN_PROGRESS ? " after --timeout-ms; " : ": ",
                 s == RS_IN_PROGRESS ? "the job looks stuck" : rs_last_error());
    return 4;
  }

  const Options& options_;
  rs_context_t* ctx_;
  float* send_;
  float* recv_;
  std::size_t count_;
  int rank_, size_;
  std::vector<std::string> names_;
  std::vector<rs_request_t*> requests_;
};

int run(const Options& options, rs_context_t* ctx) {
  // Shared buffers: no staging copies, so the step time is negotiation and ring work.
  const std::size_t total = options.bytes * static_cast<std::size_t>(options.tensors);
  void* send = nullptr;
  void* recv = nullptr;
  if (rs_alloc(ctx, total, &send) != RS_SUCCESS || rs_alloc(ctx, total, &recv) != RS_SUCCESS) {
    std::fprintf(stderr, "negotiation-bench: rs_alloc of %zu bytes failed: %s\n", total,
                 rs_last_error());
    return 4;
  }
  Bench bench(options, ctx, static_cast<float*>(send), static_cast<float*>(recv));

  double seconds = 0;
  for (int s = 0; s < options.warmup; ++s)
    if (int code = bench.step(s, &seconds); code != 0) return code;
  // Every rank starts the timed steps together, not behind another's warm-up tail.
  if (rs_status_t s = rs_barrier(ctx, "negotiation-bench-start"); s != RS_SUCCESS) {
    std::fprintf(stderr, "negotiation-bench: barrier: %s: %s\n", rs_status_string(s),
                 rs_last_error());
    return 4;
  }
  std::vector<double> step_seconds;
  step_seconds.reserve(static_cast<std::size_t>(options.steps));
  for (int s = 0; s < options.steps; ++s) {
    if (int code = bench.step(options.warmup + s, &seconds); code != 0) return code;
    step_seconds.push_back(seconds);
  }

  if (rs_rank(ctx) == 0) {
    const double median = percentile(step_seconds, 0.5);
    const double p90 = percentile(step_seconds, 0.9);
    const double per_tensor = median / options.tensors;
    std::printf("negotiation-bench: %d ranks on %d nodes, %d allreduces of %zu B per step, "
                "%d steps after %d warm-up, every result checked\n",
                rs_size(ctx), rs_num_nodes(ctx), options.tensors, options.bytes, options.steps,
                options.warmup);
    std::printf("  step time   median %.3f ms   p90 %.3f ms\n", median * 1e3, p90 * 1e3);
    std::printf("  per tensor  %.1f us (median step / tensors)\n", per_tensor * 1e6);
    std::printf("RESULT ranks=%d nodes=%d tensors=%d bytes=%zu steps=%d median_step_s=%.9f "
                "p90_step_s=%.9f per_tensor_s=%.9f\n",
                rs_size(ctx), rs_num_nodes(ctx), options.tensors, options.bytes, options.steps,
                median, p90, per_tensor);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!parse_options(argc, argv, &options)) return 2;
  rs_context_t* ctx = nullptr;
  if (rs_status_t s = rs_connect(nullptr, &ctx); s != RS_SUCCESS) {
    std::fprintf(stderr, "negotiation-bench: cannot connect to ringsyncd: %s: %s\n",
                 rs_status_string(s), rs_last_error());
    return 3;
  }
  const int code = run(options, ctx);
  rs_disconnect(ctx);
  return code;
}
