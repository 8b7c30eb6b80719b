// Each kind's class, for kind_of() (kinds.cpp): one function per file.
#pragma once

#include "service/collective/kind.h"

namespace ringsync::service::collective {

const Kind& allreduce_kind();
const Kind& broadcast_kind();
const Kind& allgather_kind();
const Kind& barrier_kind();
const Kind& reduce_scatter_kind();
const Kind& alltoall_kind();

}  // namespace ringsync::service::collective
