// What this host knows about its own side of a lost link: whether the
// network interface the link used is down, so that a node cut off from the
// ring blames itself instead of a healthy peer.
#pragma once

#include <optional>
#include <string>

namespace ringsync::service::formation {

// The name of the interface that holds `local_address`, when it is down (not
// up, or without a carrier); nullopt when it is up or not found.
std::optional<std::string> interface_down(const std::string& local_address);

}  // namespace ringsync::service::formation
