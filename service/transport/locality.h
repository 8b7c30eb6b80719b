// Where a daemon runs, as far as UCX's shared-memory transports care, and
// whether two daemons can trust them between each other.
//
// UCX offers its shared-memory transports (sysv, posix, cma, ...) between any
// two processes of one kernel (it compares the kernel's boot id), but they
// work only where the processes share more than the kernel:
// - net: a receiver asleep on its worker's event fd is woken by a datagram to
//   an abstract Unix socket, and abstract sockets belong to a network
//   namespace. Across two, every wake-up is lost (ECONNREFUSED, ignored by
//   UCX): data lands in the shared segment while its receiver sleeps, and a
//   collective crawls from one stray wake-up to the next (measured: one
//   512 KiB allreduce in tens of seconds), which looks like a hang;
// - ipc: sysv segments are found by id in the IPC namespace;
// - /dev/shm: posix segments are its files (two mount namespaces may share
//   it, as `ip netns exec` does, or each have their own, as containers do);
// - pid: posix segments are opened through /proc/PID/fd, and cma copies with
//   process_vm_readv by pid;
// - user: cma needs ptrace rights over the peer.
// Two daemons on one machine in separate network namespaces (simulated hosts)
// or separate pods (the Kubernetes sidecar layout) must therefore talk over a
// network transport. The hostname (UTS namespace) matters to none of them; it
// is kept to name the peer.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace ringsync::service::transport {

struct Locality {
  std::string boot_id;   // /proc/sys/kernel/random/boot_id: equal only within one kernel
  std::string hostname;  // for messages
  // Inode numbers of /proc/self/ns/{net,ipc,pid,user}, and the device of
  // /dev/shm; comparable only within one kernel. 0: unknown (no /proc),
  // which matches nothing.
  std::uint64_t net = 0;
  std::uint64_t ipc = 0;
  std::uint64_t shm = 0;
  std::uint64_t pid = 0;
  std::uint64_t user = 0;

  // This process's.
  static Locality here();
  // Reads the files under `proc` and `dev_shm` (a test passes folders of its own).
  static Locality read(const std::string& proc, const std::string& dev_shm, const std::string& hostname);

  std::vector<std::uint8_t> encode() const;
  static Result<Locality> decode(std::span<const std::uint8_t> bytes);

  bool operator==(const Locality&) const = default;
};

// Why UCX's shared-memory transports cannot carry data between daemons at `a`
// and `b`: "" where they can (one kernel, every namespace above shared) and
// where UCX does not offer them (two kernels). Otherwise names what they do
// not share, e.g. "network namespace, IPC namespace and /dev/shm".
std::string shared_memory_refusal(const Locality& a, const Locality& b);

// The UCX_TLS list that keeps what `transports` allows but its shared-memory
// transports ("" means UCX's choice, i.e. "all"): "tcp,sysv,self" ->
// "tcp,self"; "" or "all" -> "^sm,mm,shm,posix,sysv,cma,knem,xpmem";
// "^tcp" -> "^tcp,sm,...". "" when nothing but `self` would be left (no
// transport that reaches another process).
std::string without_shared_memory(const std::string& transports);

// Whether a UCX_TLS list ("" : all) may select a shared-memory transport.
bool may_use_shared_memory(const std::string& transports);

}  // namespace ringsync::service::transport
