// Where ringsyncd listens when nobody says otherwise. The daemon and the client
// library both use this, so they always agree.
#pragma once

#include <map>
#include <string>

namespace ringsync {

// $XDG_RUNTIME_DIR/ringsync/ringsyncd.sock when XDG_RUNTIME_DIR is an absolute
// path; else /run/ringsync/ringsyncd.sock for root; else
// /tmp/ringsync-<uid>/ringsyncd.sock.
std::string default_socket_path(const std::map<std::string, std::string>& env, unsigned uid);

// Under Slurm (SLURM_JOB_ID set): the socket of the ringsyncd started as a step
// of that job, ringsyncd-slurm-<job>.sock beside default_socket_path(), so the
// daemons of two jobs sharing a node stay apart; "" outside Slurm.
std::string slurm_socket_path(const std::map<std::string, std::string>& env, unsigned uid);

}  // namespace ringsync
