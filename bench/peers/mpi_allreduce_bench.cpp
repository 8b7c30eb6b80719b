// mpi-allreduce-bench: ringsync-bench's measurement (peer_bench.h) on MPI_Allreduce,
// MPI_Bcast, MPI_Allgather, MPI_Reduce_scatter_block and MPI_Alltoall, for
// comparing ringsync with MPI on the same hosts in the same run. Launched by mpirun, one process per rank; see bench/peers/README.md.
#include <mpi.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "bench/peers/peer_bench.h"

namespace ringsync::bench::peers {
namespace {

constexpr const char* kTool = "mpi-allreduce-bench";

const char* const kUsage =
    "usage: mpirun [MPIRUN OPTIONS] mpi-allreduce-bench [-t COLL] [-b MIN] [-e MAX] [-f FACTOR]\n"
    "              [-d TYPE] [-o OP] [-n ITERS] [-w WARMUP] [-c 0|1] [-r ROOT] [--csv FILE]\n"
    "              [--json FILE]\n"
    "\n"
    "Measures MPI_Allreduce (-t allreduce), MPI_Bcast (broadcast), MPI_Allgather\n"
    "(allgather), MPI_Reduce_scatter_block (reduce_scatter) and MPI_Alltoall (alltoall)\n"
    "exactly as ringsync-bench measures ringsync: the same flags, sizes, exact inputs,\n"
    "checks, table and files (ringsync-bench --help describes them).\n"
    "\n"
    "MPI has no half or bfloat16 type and no avg reduction: allreduce and reduce_scatter\n"
    "rows that ask for them are skipped with a '# skipped' line (the other collectives\n"
    "move them as 16-bit integers). MPI_Bcast's root broadcasts from its own input.\n"
    "Buffers are this process's memory (page aligned); which transport carries them is\n"
    "mpirun's choice (e.g. --mca btl tcp,self for TCP only, as the table's first line\n"
    "reports).\n"
    "\n"
    "Exit status: 0 all results right, 1 some element wrong, 2 bad arguments, 4 an MPI\n"
    "call failed, 5 --csv / --json could not be written.\n";

Status mpi_status(int code, const char* call) {
  if (code == MPI_SUCCESS) return Status::Ok();
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return Status::Internal(std::string(call) + ": " + std::string(text, length));
}

class MpiBackend final : public Backend {
 public:
  MpiBackend() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks_);
  }

  int rank() const override { return rank_; }
  int ranks() const override { return ranks_; }

  std::string unsupported(Collective c, DType dtype, ReduceOp op) const override {
    if (type_of(c, dtype) == MPI_DATATYPE_NULL)
      return "MPI has no " + std::string(type_name(dtype)) + " type";
    if (reduces(c) && op_of(op) == MPI_OP_NULL)
      return "MPI has no " + std::string(op_name(op)) + " reduction";
    return "";
  }

  Status prepare(Collective c, const Shape& shape, DType dtype, ReduceOp op, int root,
                 const void* send, void* recv) override {
    const std::size_t most = std::max(shape.send_count, shape.recv_count);
    if (most > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      return Status::InvalidArgument(std::to_string(most) +
                                     " elements: MPI counts are ints; lower -e");
    c_ = c;
    shape_ = shape;
    type_ = type_of(c, dtype);
    op_ = op_of(op);
    root_ = root;
    send_ = send;
    recv_ = recv;
    return Status::Ok();
  }

  Status run_once() override {
    const int count = static_cast<int>(shape_.count);
    switch (c_) {
      case Collective::kAllreduce:
        return mpi_status(MPI_Allreduce(send_, recv_, count, type_, op_, MPI_COMM_WORLD),
                          "MPI_Allreduce");
      case Collective::kBroadcast:
        // MPI_Bcast is in place: the root sends from its input.
        return mpi_status(MPI_Bcast(rank_ == root_ ? const_cast<void*>(send_) : recv_, count,
                                    type_, root_, MPI_COMM_WORLD),
                          "MPI_Bcast");
      case Collective::kAllgather:
        return mpi_status(
            MPI_Allgather(send_, count, type_, recv_, count, type_, MPI_COMM_WORLD),
            "MPI_Allgather");
      case Collective::kReduceScatter:
        return mpi_status(
            MPI_Reduce_scatter_block(send_, recv_, count, type_, op_, MPI_COMM_WORLD),
            "MPI_Reduce_scatter_block");
      case Collective::kAlltoall:
        return mpi_status(MPI_Alltoall(send_, count, type_, recv_, count, type_, MPI_COMM_WORLD),
                          "MPI_Alltoall");
    }
    return Status::InvalidArgument("unknown collective");
  }

  const void* result(const void* send, const void* recv) const override {
    return c_ == Collective::kBroadcast && rank_ == root_ ? send : recv;
  }

  Status barrier() override { return mpi_status(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

  Result<double> max_over_ranks(double mine) override {
    double worst = 0;
    Status s = mpi_status(MPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD),
                          "MPI_Allreduce");
    if (!s.ok()) return s;
    return worst;
  }

  Result<std::int64_t> sum_over_ranks(std::int64_t mine) override {
    std::int64_t total = 0;
    Status s = mpi_status(
        MPI_Allreduce(&mine, &total, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
    if (!s.ok()) return s;
    return total;
  }

 private:
  // Collectives that do not reduce only move bytes: 16-bit floats travel as
  // MPI_UINT16_T.
  static MPI_Datatype type_of(Collective c, DType dtype) {
    switch (dtype) {
      case DType::kF32: return MPI_FLOAT;
      case DType::kF64: return MPI_DOUBLE;
      case DType::kI32: return MPI_INT32_T;
      case DType::kI64: return MPI_INT64_T;
      case DType::kU8: return MPI_UINT8_T;
      case DType::kF16:
      case DType::kBF16: return reduces(c) ? MPI_DATATYPE_NULL : MPI_UINT16_T;
    }
    return MPI_DATATYPE_NULL;
  }

  static MPI_Op op_of(ReduceOp op) {
    switch (op) {
      case ReduceOp::kSum: return MPI_SUM;
      case ReduceOp::kProd: return MPI_PROD;
      case ReduceOp::kMin: return MPI_MIN;
      case ReduceOp::kMax: return MPI_MAX;
      case ReduceOp::kAvg: return MPI_OP_NULL;
    }
    return MPI_OP_NULL;
  }

  int rank_ = 0, ranks_ = 1;
  Collective c_ = Collective::kAllreduce;
  Shape shape_;
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
  MPI_Op op_ = MPI_OP_NULL;
  int root_ = 0;
  const void* send_ = nullptr;
  void* recv_ = nullptr;
};

// Nodes as MPI sees them: the ranks that share memory with one another.
RunInfo run_info(int ranks) {
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
  int local_rank = 0, local_size = 1;
  MPI_Comm_rank(local, &local_rank);
  MPI_Comm_size(local, &local_size);
  MPI_Comm_free(&local);
  int leader = local_rank == 0 ? 1 : 0, nodes = 1;
  MPI_Allreduce(&leader, &nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  return RunInfo{ranks, nodes, local_size, utc_now()};
}

// "Open MPI v4.1.4, btl tcp,self": the library, and the transports mpirun was told
// to use (mpirun hands --mca settings to its ranks as OMPI_MCA_* variables).
std::string details() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(version, &length);
  std::string text(version, length);
  text = text.substr(0, text.find_first_of(",\n"));
  for (const char* name : {"btl", "pml", "btl_tcp_if_include", "mpi_yield_when_idle"}) {
    const std::string var = std::string("OMPI_MCA_") + name;
    if (const char* value = std::getenv(var.c_str()); value != nullptr && *value != '\0')
      text.append(", ").append(name).append(" ").append(value);
  }
  return text;
}

int run(int argc, char** argv) {
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MpiBackend backend;
  // Every rank parses the same arguments; one of them says what is wrong.
  auto args = parse_peer_args(std::vector<std::string>(argv + 1, argv + argc), {}, kTool);
  if (!args.ok()) {
    if (backend.rank() == 0)
      std::fprintf(stderr, "%s: %s\n", kTool, args.status().message().c_str());
    return exit_code::kUsage;
  }
  if (args->options.help) {
    if (backend.rank() == 0) std::fputs(kUsage, stdout);
    return exit_code::kOk;
  }
  return run_bench(args->options, backend, run_info(backend.ranks()), {kTool, details()});
}

}  // namespace
}  // namespace ringsync::bench::peers

namespace {

// bench/compare keeps each emulated host's processes on its own CPUs and says
// which in RINGSYNC_BENCH_PIN="HOST=CPUS;..." (CPUS as taskset -c takes them).
// mpirun and its daemons may set the ranks' affinity themselves, so a rank
// applies its host's entry after MPI_Init; unset or no entry: left alone.
void pin_to_host_cpus() {
  const char* map = std::getenv("RINGSYNC_BENCH_PIN");
  char host[256] = {};
  if (!map || !*map || gethostname(host, sizeof host - 1) != 0) return;
  std::string entries = map;
  for (std::size_t at = 0; at <= entries.size();) {
    std::size_t end = entries.find(';', at);
    if (end == std::string::npos) end = entries.size();
    const std::string entry = entries.substr(at, end - at);
    at = end + 1;
    const std::size_t eq = entry.find('=');
    if (eq == std::string::npos || entry.substr(0, eq) != host) continue;
    cpu_set_t set;
    CPU_ZERO(&set);
    std::string cpus = entry.substr(eq + 1);
    for (std::size_t c = 0; c < cpus.size();) {
      std::size_t comma = cpus.find(',', c);
      if (comma == std::string::npos) comma = cpus.size();
      const std::string range = cpus.substr(c, comma - c);
      c = comma + 1;
      const std::size_t dash = range.find('-');
      const int lo = std::atoi(range.substr(0, dash).c_str());
      const int hi = dash == std::string::npos ? lo : std::atoi(range.substr(dash + 1).c_str());
      for (int cpu = lo; cpu <= hi && cpu < CPU_SETSIZE; ++cpu) CPU_SET(cpu, &set);
    }
    if (sched_setaffinity(0, sizeof set, &set) != 0)
      std::fprintf(stderr, "mpi-allreduce-bench: cannot keep to CPUs %s of host %s\n", cpus.c_str(), host);
    return;
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  pin_to_host_cpus();
  const int code = ringsync::bench::peers::run(argc, argv);
  MPI_Finalize();
  return code;
}
