// The arguments of one collective as the C API received them, checked before
// anything is sent to the daemon.
#pragma once

#include <cstddef>
#include <string>

#include "common/dtype.h"
#include "common/status.h"
#include "common/wire.h"

namespace ringsync::client {

inline constexpr std::size_t kMaxNameBytes = 4096;

struct CollectiveCall {
  wire::CollectiveKind kind = wire::CollectiveKind::kAllreduce;
  const char* name = nullptr;
  const void* send = nullptr;
  void* recv = nullptr;
  std::size_t count = 0;  // elements this rank contributes
  int dtype = 0;          // rs_dtype_t as passed in, checked by validate()
  int op = 0;             // rs_op_t as passed in (the reducing kinds)
  int root = 0;           // the rooted kinds
};

// Byte sizes of a validated call.
struct CallBytes {
  std::size_t send = 0;  // what this rank contributes (0: its sendbuf is not read)
  std::size_t recv = 0;  // what its recvbuf receives (send * size for allgather; 0: not written)
};

// Whether this rank's sendbuf is read (everything but a non-root's broadcast or scatter, and a barrier's).
bool reads_send(const CollectiveCall& call, int rank);

// The message for a validated call, without its buffers.
wire::Collective to_message(const CollectiveCall& call, std::uint64_t request_id);

// Checks name, dtype, op, root, NULL buffers and size overflow for a rank of a
// job of `size` local ranks. Errors are kInvalidArgument and say what to fix.
Result<CallBytes> validate(const CollectiveCall& call, int rank, int size);

}  // namespace ringsync::client
