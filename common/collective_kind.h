// What each collective kind means, as the client library, the wire codecs and
// the daemon all read it: which arguments matter, which ranks' inputs are read,
// how many elements each rank sends and receives, what "in place" means, and
// nccl-tests' bus-bandwidth factor. One table (collective_kind.cpp), indexed by
// the kind; nothing else switches on it. What the daemon does with a kind (its
// layouts on a node and its data task between nodes) is service/collective/.
#pragma once

#include <cstdint>

namespace ringsync::wire {

enum class CollectiveKind : std::uint8_t {
  kAllreduce = 0,
  kBroadcast,
  kAllgather,
  kBarrier,
  kReduceScatter,
  kAlltoall,
  kReduce,   // to a root
  kGather,   // to a root
  kScatter,  // from a root
};
inline constexpr CollectiveKind kLastCollectiveKind = CollectiveKind::kScatter;
// Whether a byte off the wire names a kind.
inline constexpr bool is_collective_kind(std::uint8_t raw) {
  return raw <= static_cast<std::uint8_t>(kLastCollectiveKind);
}

// Whose send buffers a collective reads.
enum class Senders : std::uint8_t {
  kNone,  // no data at all (barrier)
  kRoot,  // the root's only (broadcast, scatter)
  kAll,   // every rank's
};

// Whose receive buffers a collective writes (the others may pass none).
enum class Receivers : std::uint8_t {
  kAll,   // every rank's
  kRoot,  // the root's only (reduce, gather)
};

// What "in place" means for one rank's send and receive buffers.
enum class InPlace : std::uint8_t {
  kSame,           // send == recv (allreduce, broadcast)
  kSendIsOwnSlot,  // send is this rank's slot of recv (allgather)
  kRecvIsOwnSlot,  // recv is this rank's slot of send (reduce-scatter)
  kNever,          // every output slot is another rank's input (alltoall)
};

struct KindTraits {
  const char* name;  // "allreduce", "reduce_scatter": metric labels and messages
  Senders senders;
  Receivers receivers;
  bool reduces;        // applies a reduction operator: its op matters
  bool rooted;         // has a root: its root matters
  bool send_per_rank;  // the send buffer holds `count` elements for every rank
  bool recv_per_rank;  // the receive buffer holds `count` elements from every rank
  InPlace in_place;
  // Every rank ends with the same result (allreduce, broadcast, allgather):
  // copies that can be compared between nodes (--verify-results).
  bool shared_result;
  // Ready tensors of this kind, dtype and op may be fused into one operation.
  bool fuses;
  // nccl-tests' busbw / algbw among n ranks: what each rank's link carries
  // relative to the payload in a bandwidth-optimal algorithm.
  double (*bus_factor)(double n);
};

const KindTraits& traits(CollectiveKind kind);
const char* collective_kind_name(CollectiveKind kind);
// Whether the collective applies a reduction operator (its op matters).
inline bool reduces(CollectiveKind kind) { return traits(kind).reduces; }
// Whether every rank ends with the one reduction of every rank's input (allreduce).
inline bool reduces_to_all(CollectiveKind kind) { return traits(kind).reduces && traits(kind).shared_result; }
// Whether the collective moves any data (all but the barrier).
inline bool moves_data(CollectiveKind kind) { return traits(kind).senders != Senders::kNone; }

// Elements one rank's send and receive buffers hold in a collective of
// `count` (the count its call passes) among `ranks` ranks: allgather and
// gather receive count per rank, reduce-scatter and scatter send count per
// rank, alltoall both. A rooted kind's figures are the root's: the other ranks
// read or write no buffer where reads_send / writes_recv say so.
struct Extent {
  std::uint64_t send = 0;
  std::uint64_t recv = 0;
  // nccl-tests' "size" of the collective: the larger of the two.
  std::uint64_t payload() const { return send > recv ? send : recv; }
};
Extent extent(CollectiveKind kind, std::uint64_t count, std::uint64_t ranks);

// Whether `rank` passes a send buffer the collective reads (the root of a
// rooted collective whose root alone sends).
inline bool reads_send(CollectiveKind kind, std::uint64_t rank, std::uint64_t root) {
  const Senders s = traits(kind).senders;
  return s == Senders::kAll || (s == Senders::kRoot && rank == root);
}

// Whether `rank` passes a receive buffer the collective writes (all but the
// non-root ranks of a reduce or gather).
inline bool writes_recv(CollectiveKind kind, std::uint64_t rank, std::uint64_t root) {
  const KindTraits& t = traits(kind);
  return t.senders != Senders::kNone && (t.receivers == Receivers::kAll || rank == root);
}

}  // namespace ringsync::wire
