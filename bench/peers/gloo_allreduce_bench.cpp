// gloo-allreduce-bench: ringsync-bench's measurement (peer_bench.h) on Gloo over its
// TCP transport: gloo::allreduce (ring or bcube), Gloo's classic in-place
// AllreduceRing and AllreduceRingChunked, gloo::broadcast and gloo::allgather. One
// process per rank, started by any launcher (bench/peers/gloo-launch.sh); the ranks
// meet through a FileStore directory they share. See bench/peers/README.md.
#include <gloo/algorithm.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/config.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/types.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/peers/peer_bench.h"
#include "common/units.h"

namespace ringsync::bench::peers {
namespace {

constexpr const char* kTool = "gloo-allreduce-bench";

const char* const kUsage =
    "usage: gloo-allreduce-bench --rank R --size N --store DIR [-a ALGORITHM] [--iface IF]\n"
    "              [--hostname ADDR] [--timeout SECONDS] [ringsync-bench's flags]\n"
    "\n"
    "Measures Gloo's collectives over its TCP transport exactly as ringsync-bench\n"
    "measures ringsync: the same flags (-t -b -e -f -d -o -n -w -c -r --csv --json),\n"
    "sizes, exact inputs, checks, table and files (ringsync-bench --help describes them).\n"
    "Start one process per rank, e.g. with bench/peers/gloo-launch.sh.\n"
    "\n"
    "  -a, --algorithm A   allreduce's implementation (default ring):\n"
    "                        ring          gloo::allreduce, ring (what torch.distributed's\n"
    "                                      Gloo backend calls), out of place\n"
    "                        bcube         gloo::allreduce, bcube, out of place\n"
    "                        ring-inplace  gloo::AllreduceRing, in place\n"
    "                        ring-chunked  gloo::AllreduceRingChunked, in place\n"
    "      --rank R        this process's rank (env RANK, OMPI_COMM_WORLD_RANK)\n"
    "      --size N        number of ranks (env WORLD_SIZE, OMPI_COMM_WORLD_SIZE)\n"
    "      --store DIR     a directory every rank sees, empty at the start of the run,\n"
    "                      for Gloo's FileStore rendezvous (env GLOO_BENCH_STORE)\n"
    "      --iface IF      the network interface Gloo's TCP device binds\n"
    "                      (env GLOO_SOCKET_IFNAME)\n"
    "      --hostname A    or the address (or host name) it binds (env GLOO_BENCH_HOSTNAME);\n"
    "                      neither: Gloo resolves this machine's host name\n"
    "      --timeout S     Gloo's timeout for the rendezvous and each collective, seconds\n"
    "                      (default 300)\n"
    "\n"
    "Env LOCAL_WORLD_SIZE (ranks per node, set by gloo-launch.sh) only labels the table.\n"
    "Gloo has no bfloat16 type and no avg reduction: allreduce rows that ask for them\n"
    "are skipped with a '# skipped' line, and so are reduce_scatter rows (Gloo's only\n"
    "reduce-scatter, ReduceScatterHalvingDoubling, works in place with its own layout).\n"
    "alltoall is gloo::alltoall. In-place algorithms run the timed iterations\n"
    "on their own results, then the check runs once more from fresh inputs (as\n"
    "nccl-tests checks in place).\n"
    "\n"
    "Exit status: 0 all results right, 1 some element wrong, 2 bad arguments, 3 the\n"
    "rendezvous failed, 4 a collective failed, 5 --csv / --json could not be written.\n";

const std::vector<OwnFlag> kOwnFlags = {
    {'a', "algorithm"}, {0, "rank"},     {0, "size"},    {0, "store"},
    {0, "iface"},       {0, "hostname"}, {0, "timeout"},
};

enum class Algorithm { kRing, kBcube, kRingInPlace, kRingChunked };

struct GlooFlags {
  Algorithm algorithm = Algorithm::kRing;
  std::string algorithm_name = "ring";
  int rank = -1;
  int size = -1;
  std::string store;
  std::string iface;
  std::string hostname;
  std::chrono::seconds timeout{300};
};

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

std::string first_set(std::initializer_list<const char*> names) {
  for (const char* name : names)
    if (std::string v = env(name); !v.empty()) return v;
  return "";
}

Result<int> parse_count(const std::string& flag, const std::string& text, int min) {
  auto v = units::parse_int(text);
  if (!v.ok() || *v < min || *v > (1 << 20))
    return Status::InvalidArgument(flag + " '" + text + "': want a whole number from " +
                                   std::to_string(min));
  return static_cast<int>(*v);
}

// Flags first, then the environment.
Result<GlooFlags> gloo_flags(const std::vector<std::pair<std::string, std::string>>& own) {
  GlooFlags g;
  std::string rank = first_set({"RANK", "OMPI_COMM_WORLD_RANK"});
  std::string size = first_set({"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE"});
  g.store = env("GLOO_BENCH_STORE");
  g.iface = env("GLOO_SOCKET_IFNAME");
  g.hostname = env("GLOO_BENCH_HOSTNAME");
  std::string timeout;
  for (const auto& [name, value] : own) {
    if (name == "algorithm") {
      constexpr std::pair<const char*, Algorithm> kNames[] = {
          {"ring", Algorithm::kRing},
          {"bcube", Algorithm::kBcube},
          {"ring-inplace", Algorithm::kRingInPlace},
          {"ring-chunked", Algorithm::kRingChunked}};
      bool found = false;
      for (auto [text, algorithm] : kNames)
        if (value == text) g.algorithm = algorithm, g.algorithm_name = text, found = true;
      if (!found)
        return Status::InvalidArgument("-a '" + value +
                                       "': use ring, bcube, ring-inplace or ring-chunked");
    } else if (name == "rank") {
      rank = value;
    } else if (name == "size") {
      size = value;
    } else if (name == "store") {
      g.store = value;
    } else if (name == "iface") {
      g.iface = value;
    } else if (name == "hostname") {
      g.hostname = value;
    } else if (name == "timeout") {
      timeout = value;
    }
  }
  if (rank.empty() || size.empty() || g.store.empty())
    return Status::InvalidArgument(
        "give --rank, --size and --store (or env RANK, WORLD_SIZE, GLOO_BENCH_STORE)");
  auto r = parse_count("--rank", rank, 0);
  auto n = parse_count("--size", size, 1);
  if (!r.ok()) return r.status();
  if (!n.ok()) return n.status();
  if (*r >= *n)
    return Status::InvalidArgument("--rank " + rank + " is not below --size " + size);
  g.rank = *r;
  g.size = *n;
  if (!timeout.empty()) {
    auto t = parse_count("--timeout", timeout, 1);
    if (!t.ok()) return t.status();
    g.timeout = std::chrono::seconds(*t);
  }
  return g;
}

// Runs f.template operator()<T>() with T the C++ type Gloo reduces for dtype.
// Collectives that do not reduce only move bytes: bfloat16 travels as uint16_t.
template <class F>
Status with_type(Collective c, DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF32: return f.template operator()<float>();
    case DType::kF64: return f.template operator()<double>();
    case DType::kF16: return f.template operator()<gloo::float16>();
    case DType::kI32: return f.template operator()<std::int32_t>();
    case DType::kI64: return f.template operator()<std::int64_t>();
    case DType::kU8: return f.template operator()<std::uint8_t>();
    case DType::kBF16:
      if (!reduces(c)) return f.template operator()<std::uint16_t>();
      break;
  }
  return Status::InvalidArgument("Gloo has no " + std::string(type_name(dtype)) + " type");
}

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

template <class T>
ReduceFn reduce_fn(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return static_cast<ReduceFn>(&gloo::sum<T>);
    case ReduceOp::kProd: return static_cast<ReduceFn>(&gloo::product<T>);
    case ReduceOp::kMin: return static_cast<ReduceFn>(&gloo::min<T>);
    case ReduceOp::kMax: return static_cast<ReduceFn>(&gloo::max<T>);
    case ReduceOp::kAvg: break;
  }
  return nullptr;
}

template <class T>
const gloo::ReductionFunction<T>* reduction_function(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return gloo::ReductionFunction<T>::sum;
    case ReduceOp::kProd: return gloo::ReductionFunction<T>::product;
    case ReduceOp::kMin: return gloo::ReductionFunction<T>::min;
    case ReduceOp::kMax: return gloo::ReductionFunction<T>::max;
    case ReduceOp::kAvg: break;
  }
  return nullptr;
}

// Gloo reports failures by throwing (gloo::IoException on a lost peer or a timeout,
// gloo::EnforceNotMet on misuse); here they become values.
template <class F>
Status guarded(const char* what, F&& f) {
  try {
    f();
    return Status::Ok();
  } catch (const std::exception& e) {
    return Status::Internal(std::string(what) + ": " + e.what());
  }
}

class GlooBackend final : public Backend {
 public:
  GlooBackend(std::shared_ptr<gloo::Context> context, Algorithm algorithm)
      : context_(std::move(context)), algorithm_(algorithm) {}

  int rank() const override { return context_->rank; }
  int ranks() const override { return context_->size; }

  std::string unsupported(Collective c, DType dtype, ReduceOp op) const override {
    if (c == Collective::kReduceScatter)
      return "not measured: Gloo's ReduceScatterHalvingDoubling is in place, in its own layout";
    if (c != Collective::kAllreduce) return "";
    if (dtype == DType::kBF16) return "Gloo has no bfloat16 type";
    if (op == ReduceOp::kAvg) return "Gloo has no avg reduction";
    return "";
  }

  Status prepare(Collective c, const Shape& shape, DType dtype, ReduceOp op, int root,
                 const void* send, void* recv) override {
    run_ = nullptr;
    allreduce_.reset();
    broadcast_.reset();
    allgather_.reset();
    alltoall_.reset();
    legacy_.reset();
    in_place_ = false;
    return with_type(c, dtype, [&]<class T>() {
      T* in = static_cast<T*>(const_cast<void*>(send));
      T* out = static_cast<T*>(recv);
      return guarded("preparing", [&] {
        switch (c) {
          case Collective::kAllreduce: prepare_allreduce<T>(in, out, shape.count, op); break;
          case Collective::kBroadcast:
            broadcast_ = std::make_unique<gloo::BroadcastOptions>(context_);
            if (rank() == root) broadcast_->setInput(in, shape.count);
            broadcast_->setOutput(out, shape.count);
            broadcast_->setRoot(root);
            run_ = [this] { gloo::broadcast(*broadcast_); };
            break;
          case Collective::kAllgather:
            allgather_ = std::make_unique<gloo::AllgatherOptions>(context_);
            allgather_->setInput(in, shape.send_count);
            allgather_->setOutput(out, shape.recv_count);
            run_ = [this] { gloo::allgather(*allgather_); };
            break;
          case Collective::kAlltoall:
            alltoall_ = std::make_unique<gloo::AlltoallOptions>(context_);
            alltoall_->setInput(in, shape.send_count);
            alltoall_->setOutput(out, shape.recv_count);
            run_ = [this] { gloo::alltoall(*alltoall_); };
            break;
          case Collective::kReduceScatter:
            throw std::invalid_argument("reduce_scatter is not measured on Gloo");
        }
      });
    });
  }

  Status run_once() override { return guarded("running", run_); }
  bool in_place() const override { return in_place_; }

  Status barrier() override {
    return guarded("gloo::barrier", [&] {
      gloo::BarrierOptions opts(context_);
      gloo::barrier(opts);
    });
  }

  Result<double> max_over_ranks(double mine) override {
    return reduce_one<double>(mine, &gloo::max<double>);
  }
  Result<std::int64_t> sum_over_ranks(std::int64_t mine) override {
    return reduce_one<std::int64_t>(mine, &gloo::sum<std::int64_t>);
  }

 private:
  template <class T>
  void prepare_allreduce(T* in, T* out, std::size_t count, ReduceOp op) {
    if (algorithm_ == Algorithm::kRing || algorithm_ == Algorithm::kBcube) {
      allreduce_ = std::make_unique<gloo::AllreduceOptions>(context_);
      allreduce_->setAlgorithm(algorithm_ == Algorithm::kRing
                                   ? gloo::AllreduceOptions::Algorithm::RING
                                   : gloo::AllreduceOptions::Algorithm::BCUBE);
      allreduce_->setInput(in, count);
      allreduce_->setOutput(out, count);
      allreduce_->setReduceFunction(reduce_fn<T>(op));
      run_ = [this] { gloo::allreduce(*allreduce_); };
      return;
    }
    // The classic algorithms count elements in an int.
    if (count > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw std::invalid_argument(std::to_string(count) +
                                  " elements: AllreduceRing counts are ints; lower -e");
    const auto n = static_cast<int>(count);
    if (algorithm_ == Algorithm::kRingInPlace)
      legacy_ = std::make_unique<gloo::AllreduceRing<T>>(context_, std::vector<T*>{out}, n,
                                                         reduction_function<T>(op));
    else
      legacy_ = std::make_unique<gloo::AllreduceRingChunked<T>>(context_, std::vector<T*>{out}, n,
                                                                reduction_function<T>(op));
    in_place_ = true;
    run_ = [this] { legacy_->run(); };
  }

  template <class T>
  Result<T> reduce_one(T mine, ReduceFn fn) {
    T result = 0;
    Status s = guarded("gloo::allreduce", [&] {
      gloo::AllreduceOptions opts(context_);
      opts.setInput(&mine, 1);
      opts.setOutput(&result, 1);
      opts.setReduceFunction(fn);
      gloo::allreduce(opts);
    });
    if (!s.ok()) return s;
    return result;
  }

  std::shared_ptr<gloo::Context> context_;
  Algorithm algorithm_;
  std::function<void()> run_;
  bool in_place_ = false;
  std::unique_ptr<gloo::AllreduceOptions> allreduce_;
  std::unique_ptr<gloo::BroadcastOptions> broadcast_;
  std::unique_ptr<gloo::AllgatherOptions> allgather_;
  std::unique_ptr<gloo::AlltoallOptions> alltoall_;
  std::unique_ptr<gloo::Algorithm> legacy_;
};

// The TCP device and the full mesh of connections, through the FileStore.
Result<std::shared_ptr<gloo::Context>> connect(const GlooFlags& g,
                                               std::shared_ptr<gloo::transport::Device>* device) {
  std::shared_ptr<gloo::rendezvous::Context> context;
  Status s = guarded("the rendezvous", [&] {
    gloo::transport::tcp::attr attr;
    attr.iface = g.iface;
    attr.hostname = g.hostname;
    *device = gloo::transport::tcp::CreateDevice(attr);
    gloo::rendezvous::FileStore store(g.store);
    context = std::make_shared<gloo::rendezvous::Context>(g.rank, g.size);
    context->setTimeout(g.timeout);
    context->connectFullMesh(store, *device);
  });
  if (!s.ok()) return s;
  return std::shared_ptr<gloo::Context>(context);
}

RunInfo run_info(int ranks) {
  int local = ranks;
  if (auto v = units::parse_int(env("LOCAL_WORLD_SIZE"));
      v.ok() && *v >= 1 && *v <= ranks && ranks % *v == 0)
    local = static_cast<int>(*v);
  return RunInfo{ranks, ranks / local, local, utc_now()};
}

int run(int argc, char** argv) {
  auto args = parse_peer_args(std::vector<std::string>(argv + 1, argv + argc), kOwnFlags, kTool);
  if (!args.ok()) {
    std::fprintf(stderr, "%s: %s\n", kTool, args.status().message().c_str());
    return exit_code::kUsage;
  }
  if (args->options.help) {
    std::fputs(kUsage, stdout);
    return exit_code::kOk;
  }
  auto g = gloo_flags(args->own);
  if (!g.ok()) {
    std::fprintf(stderr, "%s: %s\n", kTool, g.status().message().c_str());
    return exit_code::kUsage;
  }
  std::shared_ptr<gloo::transport::Device> device;
  auto context = connect(*g, &device);
  if (!context.ok()) {
    std::fprintf(stderr, "%s: rank %d: %s\n", kTool, g->rank, context.status().message().c_str());
    return exit_code::kConnect;
  }
  GlooBackend backend(*context, g->algorithm);
  const Describe describe{
      kTool, "Gloo " + std::to_string(GLOO_VERSION_MAJOR) + "." +
                 std::to_string(GLOO_VERSION_MINOR) + "." + std::to_string(GLOO_VERSION_PATCH) +
                 ", allreduce " + g->algorithm_name + ", " + device->str(),
      g->algorithm == Algorithm::kRingInPlace || g->algorithm == Algorithm::kRingChunked};
  return run_bench(args->options, backend, run_info(backend.ranks()), describe);
}

}  // namespace
}  // namespace ringsync::bench::peers

int main(int argc, char** argv) { return ringsync::bench::peers::run(argc, argv); }
