// Slurm's compressed host lists, as in SLURM_JOB_NODELIST and
// SLURM_STEP_NODELIST: "n[01-03,07],gpu-a[1-2]-ib,login" expands to n01 n02
// n03 n07 gpu-a1-ib gpu-a2-ib login, in that order (the order Slurm numbers
// the nodes in, SLURM_NODEID). What `scontrol show hostnames` prints, without
// needing scontrol. Several bracket groups in one name multiply out
// ("r[1-2]n[1-2]": r1n1 r1n2 r2n1 r2n2); a range keeps the zero padding of
// its first number.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace ringsync {

// The host names of `list`; an error naming the malformed part (unbalanced
// brackets, a reversed or non-numeric range, an empty name), or when the list
// would name more than `max_hosts` hosts.
Result<std::vector<std::string>> expand_hostlist(std::string_view list, std::size_t max_hosts = 65536);

}  // namespace ringsync
