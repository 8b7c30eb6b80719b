// Each kind's class, for kind_of() (kinds.cpp): one file per kind, or per
// kind and its rooted form (allreduce.cpp: reduce; allgather.cpp: gather).
#pragma once

#include "service/collective/kind.h"

namespace ringsync::service::collective {

const Kind& allreduce_kind();
const Kind& broadcast_kind();
const Kind& allgather_kind();
const Kind& barrier_kind();
const Kind& reduce_scatter_kind();
const Kind& alltoall_kind();
const Kind& reduce_kind();
const Kind& gather_kind();
const Kind& scatter_kind();

}  // namespace ringsync::service::collective
