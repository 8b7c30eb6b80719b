// Free TCP ports on 127.0.0.1 for servers that other processes start a moment
// later: the daemons of `ringsync launch`, and torch.distributed's rendezvous
// store in rank 0. A port is free only when it is checked, and another process
// may take it before the real bind. The kernel gives outgoing connections
// ports from its ephemeral range (/proc/sys/net/ipv4/ip_local_port_range),
// which is also where a bind to port 0 picks, so on a busy machine such a
// port is now and then taken by a connection made in between ("Address
// already in use" in rank 0). These are picked below that range, where only
// another listener can take them, at random so that launchers started
// together pick different ones.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "common/status.h"

namespace ringsync {

// A TCP socket bound (not listening) to 127.0.0.1:port, which holds the port
// until it is closed; port 0: one the kernel picks. -1 with errno set.
int bind_loopback(std::uint16_t port);

// The kernel's ephemeral port range [first, last]; Linux's default
// {32768, 60999} when it cannot be read.
std::pair<int, int> ephemeral_port_range();

// `count` distinct ports free on 127.0.0.1 now (none for count <= 0): below
// the ephemeral range when it leaves at least 1024 ports above 1023 there,
// else as a bind to port 0 picks them.
Result<std::vector<std::uint16_t>> free_loopback_ports(int count);

// The same, picking at random in [low, high] (tried a few hundred times per
// port) and as a bind to port 0 picks when nothing there is free (or the
// range is empty, low > high).
Result<std::vector<std::uint16_t>> free_loopback_ports_between(int count, int low, int high);

}  // namespace ringsync
