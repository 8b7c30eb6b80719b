#include "common/collective_kind.h"

#include <array>

namespace ringsync::wire {
namespace {

double twice_all_but_one(double n) { return n <= 1 ? 1.0 : 2.0 * (n - 1.0) / n; }
double all_but_one(double n) { return n <= 1 ? 1.0 : (n - 1.0) / n; }
double one(double) { return 1.0; }
double none(double n) { return n <= 1 ? 1.0 : 0.0; }

// By CollectiveKind, in the enum's order. A reduce's busbw is nccl-tests':
// the payload crosses each link once.
//                     name              senders         receivers         reduces rooted send/rank recv/rank in place                shared fuses  busbw factor
constexpr std::array<KindTraits, 9> kKinds{{
    {"allreduce",      Senders::kAll,  Receivers::kAll,  true,  false, false, false, InPlace::kSame,          true,  true,  twice_all_but_one},
    {"broadcast",      Senders::kRoot, Receivers::kAll,  false, true,  false, false, InPlace::kSame,          true,  false, one},
    {"allgather",      Senders::kAll,  Receivers::kAll,  false, false, false, true,  InPlace::kSendIsOwnSlot, true,  false, all_but_one},
    {"barrier",        Senders::kNone, Receivers::kAll,  false, false, false, false, InPlace::kSame,          false, false, none},
    {"reduce_scatter", Senders::kAll,  Receivers::kAll,  true,  false, true,  false, InPlace::kRecvIsOwnSlot, false, false, all_but_one},
    {"alltoall",       Senders::kAll,  Receivers::kAll,  false, false, true,  true,  InPlace::kNever,         false, false, all_but_one},
    {"reduce",         Senders::kAll,  Receivers::kRoot, true,  true,  false, false, InPlace::kSame,          false, false, one},
    {"gather",         Senders::kAll,  Receivers::kRoot, false, true,  false, true,  InPlace::kSendIsOwnSlot, false, false, all_but_one},
    {"scatter",        Senders::kRoot, Receivers::kAll,  false, true,  true,  false, InPlace::kRecvIsOwnSlot, false, false, all_but_one},
}};
static_assert(kKinds.size() == static_cast<std::size_t>(kLastCollectiveKind) + 1, "one row per kind");

constexpr KindTraits kInvalid{"invalid", Senders::kNone, Receivers::kAll, false, false, false, false, InPlace::kSame,
                              false, false, none};

}  // namespace

const KindTraits& traits(CollectiveKind kind) {
  const auto i = static_cast<std::size_t>(kind);
  return i < kKinds.size() ? kKinds[i] : kInvalid;
}

const char* collective_kind_name(CollectiveKind kind) { return traits(kind).name; }

Extent extent(CollectiveKind kind, std::uint64_t count, std::uint64_t ranks) {
  const KindTraits& t = traits(kind);
  if (t.senders == Senders::kNone) return {0, 0};
  return {t.send_per_rank ? count * ranks : count, t.recv_per_rank ? count * ranks : count};
}

}  // namespace ringsync::wire
