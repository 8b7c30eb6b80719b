// A collective between the nodes of a ring as a non-blocking task (UCC's
// ucc_coll_task_t): post() starts it, progress() advances it and says whether
// it is still running, finished, or failed; the destructor is finalize.
//
// One loop drives everything on a node: call Transport::progress() (which runs
// the callbacks of completed sends and receives), then progress() on every
// task in flight, and when neither did anything, arm the transport and wait on
// its event fd. Tasks own no threads and never block.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/status.h"
#include "service/ring/stage_gate.h"

namespace ringsync::service::ring {

enum class TaskState : std::uint8_t { kInProgress, kDone, kError };

class Task {
 public:
  virtual ~Task() = default;

  // Checks the arguments and posts the first messages. A non-ok result for
  // bad arguments is final: nothing was posted and progress() returns kError.
  // A second call is refused and changes nothing.
  virtual Status post() = 0;

  // Does whatever the completed operations allow: lands received chunks,
  // posts further sends and receives. Never blocks.
  //
  // After a failure the task posts nothing more and returns kError once every
  // operation it had posted has completed (so its buffers may be released). A
  // peer that went silent completes nothing: the owner's failure detection
  // calls abort() on its tasks and Transport::cancel_all, which completes them.
  //
  // Destroy a task only after it returned kDone or kError, or after
  // cancel_all on its transport: the transport may still write into the
  // caller's buffer until then.
  virtual TaskState progress() = 0;

  // Fails the task with `why` (the job is being torn down, a peer was lost):
  // it posts nothing more from now on. What it already posted still has to
  // complete, so the owner follows with Transport::cancel_all, after which
  // progress() returns kError. Does nothing once the task has finished.
  virtual void abort(const Status& why) = 0;

  // Ok until the task fails; then the first error, at once (progress() may
  // still return kInProgress while posted operations drain), with the code of
  // the operation that failed (e.g. kPeerLost) and a message naming the
  // algorithm, the peer, the collective, the step and the chunk.
  virtual const Status& status() const = 0;
};

// What every ring task is given besides its buffer.
struct RingOptions {
  // Collective sequence number, the same on every node for the same
  // collective: it is part of every tag, so collectives in flight at the same
  // time never match each other's messages.
  std::uint32_t sequence = 0;
  // Tag step of this task's first ring step. A collective made of phases
  // (allreduce = reduce-scatter + allgather) numbers the later phase's steps
  // after the earlier one's, under one sequence number.
  std::uint16_t first_step = 0;
  // Largest message: each segment is cut into chunks of at most this many
  // bytes (whole elements, at least one), so receiving, reducing and sending
  // overlap. Chunks grow where a segment would need more than 65536 of them.
  std::size_t chunk_bytes = 512 * 1024;
  // Chunks in flight each way (sends, and receives with their scratch slots).
  std::size_t window = 4;
  // Where the buffer is filled and drained while the task runs (stage_gate.h);
  // null: the buffer holds this node's data from the start.
  StageGate* gate = nullptr;
  // Out of place: this node's input, element for element beside the buffer
  // (same count), read where the task would read its own data from the
  // buffer; the buffer then needs no copy of it and the input is never
  // written. Either the buffer itself or not overlapping it; not with a gate.
  // Only the reduce-scatter and the ring allreduce read it; the other tasks
  // refuse it. Null: in place.
  const void* input = nullptr;
};

}  // namespace ringsync::service::ring
