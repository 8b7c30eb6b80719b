// Where the daemon reads and writes one collective: straight in the caller's
// shared buffers (zero copy) or in a bounce buffer, with the copies bounce
// needs. In-place calls stay in place on both paths.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>

#include "client/src/collective_call.h"
#include "common/status.h"
#include "common/wire.h"

namespace ringsync::client {

struct Location {
  enum class Where { kNone, kShared, kBounce };
  Where where = Where::kNone;
  wire::BufferRef shared;            // kShared: the daemon's name for it
  std::byte* ptr = nullptr;          // kShared: the caller's address of it
  std::uint64_t bounce_offset = 0;  // kBounce
};

// Before submitting: caller memory -> shared memory.
struct CopyIn {
  const std::byte* from = nullptr;
  Location to;
  std::size_t bytes = 0;
};

// After a successful completion: bounce buffer -> the caller's recvbuf.
struct CopyOut {
  std::uint64_t bounce_offset = 0;
  std::byte* to = nullptr;
  std::size_t bytes = 0;
};

struct Placement {
  Location send;
  Location recv;
  std::size_t bounce_bytes = 0;  // > 0: needs a bounce buffer this large
  std::optional<CopyIn> copy_in;
  std::optional<CopyOut> copy_out;
  bool bounced() const { return copy_in.has_value() || copy_out.has_value(); }
};

// Looks up a pointer range among the caller's shared buffers (SharedBuffers::find).
using FindShared = std::function<Result<std::optional<wire::BufferRef>>(const void*, std::size_t)>;

// Decides the placement of a validated call made by `rank`.
Result<Placement> place(const CollectiveCall& call, const CallBytes& bytes, int rank,
                        const FindShared& find);

// The daemon's reference for a location; `bounce_id` names the bounce buffer.
wire::BufferRef buffer_ref(const Location& where, std::uint32_t bounce_id);

// Performs the copy-in; `bounce` is the bounce buffer's memory (unused without one).
void apply_copy_in(const Placement& placement, std::byte* bounce);

// Performs the copy-out from the bounce buffer's memory.
void apply_copy_out(const Placement& placement, const std::byte* bounce);

}  // namespace ringsync::client
