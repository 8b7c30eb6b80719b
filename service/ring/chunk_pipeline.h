// What every ring algorithm shares once it has said which chunk goes where.
//
// An algorithm plans its messages in the order its description gives them
// (step by step, chunk by chunk): the chunks it sends and the chunks it
// receives. ChunkPipeline runs that plan as a non-blocking Task:
// - at most `window` receives and `window` sends are in flight, so receiving
//   chunk k+1, landing chunk k and sending chunk k-1 overlap in bounded memory;
// - receives are posted and landed in plan order; a send is posted once the
//   receive it forwards has landed (Send::after_landed);
// - a receive that needs reducing arrives in a scratch slot (one per window
//   place) and land() folds it into place; others arrive in place;
// - the first failed operation fails the task with that operation's code and
//   a message naming the peer, step and chunk; nothing more is posted, and the
//   task returns kError once every operation it posted has completed;
// - with a StageGate (stage_gate.h), a send of this node's own input
//   (Send::own_input) and the landing of a chunk that is reduced into this
//   node's data (via_scratch) wait until the gate says the range is filled;
//   a receive that lands a final result (Recv::final) is reported to it.
//
// Completion callbacks only record what completed (in a ledger they share with
// the task, so they stay safe even if the task is gone); all work happens in
// progress().
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "service/ring/task.h"
#include "service/transport/transport.h"

namespace ringsync::service::ring {

// A planned receive, as plan_recv() returns it: a send that forwards its data
// names it, and goes once it has landed.
struct PlannedRecv {
  std::size_t index = 0;  // in plan order
};

class ChunkPipeline : public Task {
 public:
  // Plans (see plan()) and posts the first operations, with at most `window`
  // in flight each way. A plan without messages is done at once.
  Status post() final;
  TaskState progress() override;
  void abort(const Status& why) override;
  const Status& status() const override;

 protected:
  struct Send {
    int peer = 0;
    std::uint64_t tag = 0;
    const std::byte* data = nullptr;
    std::size_t bytes = 0;
    // Post only after this many receives (in plan order) have landed.
    std::size_t after_landed = 0;
    // Reads this node's own input: waits for the gate's filled().
    bool own_input = false;
  };
  struct Recv {
    int peer = 0;
    std::uint64_t tag = 0;
    std::byte* place = nullptr;  // where the chunk belongs in the buffer
    std::size_t bytes = 0;
    bool via_scratch = false;  // arrive in a scratch slot; land() puts it in place
    bool final = false;        // lands the collective's final result: told to the gate
  };

  // `algorithm` names the task in error messages ("reduce-scatter"); `gate` may be null.
  ChunkPipeline(transport::Transport& transport, std::string algorithm, std::size_t window,
                StageGate* gate = nullptr);

  transport::Transport& transport() const { return transport_; }
  StageGate* gate() const { return gate_; }
  const std::string& algorithm() const { return algorithm_; }

  // Checks the arguments and plans every message with plan_send/plan_recv;
  // an error refuses the task (nothing is posted).
  virtual Status plan() = 0;
  void plan_send(const Send& send);
  // A send that forwards what `forwards` received: posted once it has landed
  // (and every receive planned before it).
  void plan_send(Send send, PlannedRecv forwards);
  PlannedRecv plan_recv(const Recv& recv);

  // Called for every receive, in plan order, once its data is in: `scratch`
  // holds it when recv.via_scratch, otherwise it is null and the data is
  // already in place. The default does nothing.
  virtual void land(std::size_t index, const Recv& recv, const std::byte* scratch);

 private:
  struct Ledger;

  void start();
  void post_ready();
  void post_send(const Send& send);
  void post_recv(std::size_t index);

  transport::Transport& transport_;
  std::string algorithm_;
  StageGate* gate_ = nullptr;
  std::vector<Send> sends_;
  std::vector<Recv> recvs_;
  std::shared_ptr<Ledger> ledger_;
  std::size_t window_ = 1;      // sends in flight
  std::size_t slots_ = 0;       // receives in flight: min(window, receives planned)
  std::size_t slot_bytes_ = 0;  // largest receive that arrives via scratch
  std::size_t sends_posted_ = 0;
  std::size_t recvs_posted_ = 0;
  std::size_t recvs_landed_ = 0;
  bool started_ = false;
  TaskState state_ = TaskState::kInProgress;
};

}  // namespace ringsync::service::ring
