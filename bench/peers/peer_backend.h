// What a peer library (OpenMPI, Gloo) has to offer for ringsync-bench's measurement
// loop to run on it: the collectives themselves, plus a barrier and two small
// reductions for agreeing on times and wrong-element counts. One implementation per
// harness (mpi_allreduce_bench.cpp, gloo_allreduce_bench.cpp); the loop, the
// inputs, the checks and the table are shared (peer_bench.h) so that the rows of
// every tool mean the same thing.
#pragma once

#include <cstdint>
#include <string>

#include "bench/bench_collective.h"
#include "common/dtype.h"
#include "common/status.h"

namespace ringsync::bench::peers {

class Backend {
 public:
  virtual ~Backend() = default;

  virtual int rank() const = 0;
  virtual int ranks() const = 0;

  // Empty when the library runs collective c on dtype with op; otherwise why not
  // ("MPI has no half type"). Such rows are skipped, with the reason in the table.
  virtual std::string unsupported(Collective c, DType dtype, ReduceOp op) const = 0;

  // Sets up one row: the same collective on the same buffers, run many times.
  virtual Status prepare(Collective c, const Shape& shape, DType dtype, ReduceOp op, int root,
                         const void* send, void* recv) = 0;
  // Runs the prepared collective once, to completion.
  virtual Status run_once() = 0;

  // true: run_once reduces recv in place (Gloo's AllreduceRing and
  // AllreduceRingChunked), so recv must hold the input before the row starts and is
  // refilled before the checked run.
  virtual bool in_place() const { return false; }
  // Where this rank finds the result: recv, except for a root that broadcasts from
  // its own buffer (MPI_Bcast).
  virtual const void* result(const void* send, const void* recv) const {
    (void)send;
    return recv;
  }

  virtual Status barrier() = 0;
  virtual Result<double> max_over_ranks(double mine) = 0;
  virtual Result<std::int64_t> sum_over_ranks(std::int64_t mine) = 0;
};

}  // namespace ringsync::bench::peers
