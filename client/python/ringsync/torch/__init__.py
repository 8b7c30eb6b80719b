"""ringsync for PyTorch: Horovod's ``horovod.torch`` API over the ringsync daemon.

    import ringsync.torch as rst
    rst.init()
    optimizer = rst.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    rst.broadcast_parameters(model.state_dict(), root_rank=0)
    rst.broadcast_optimizer_state(optimizer, root_rank=0)

or torch.distributed's own API on the "ringsync" backend, which importing this package
registers (ringsync.torch.distributed):

    import ringsync.torch
    torch.distributed.init_process_group("ringsync")
    model = torch.nn.parallel.DistributedDataParallel(model)

CPU and CUDA tensors (each call's tensors on one device); every collective goes through the
core package ``ringsync``.
"""

try:
  import torch as _torch  # noqa: F401  (a clear error before anything else)
except ImportError as error:  # pragma: no cover - depends on the environment
  raise ImportError("ringsync.torch needs PyTorch (pip install torch, or Debian's python3-torch)"
                    ) from error

from ringsync import (Average, Max, Min, Product, RingsyncError, Sum, barrier, init,
                      is_initialized, local_rank, local_size, node_rank, num_nodes, rank,
                      shutdown, size)

from . import distributed
from .compression import Compression
from .distributed import register
from .events import Event, EventLog
from .functions import broadcast_object, broadcast_optimizer_state, broadcast_parameters
from .handle import Handle, poll, synchronize
from .ops import (allgather, allgather_async, allreduce, allreduce_, allreduce_async,
                  allreduce_async_, broadcast, broadcast_, broadcast_async, broadcast_async_)
from .optimizer import DistributedOptimizer

__all__ = [
    "Average", "Sum", "Min", "Max", "Product", "RingsyncError",
    "init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size",
    "node_rank", "num_nodes", "barrier",
    "Compression", "DistributedOptimizer", "Event", "EventLog", "Handle",
    "broadcast_parameters", "broadcast_optimizer_state", "broadcast_object",
    "allreduce", "allreduce_", "allreduce_async", "allreduce_async_",
    "allgather", "allgather_async",
    "broadcast", "broadcast_", "broadcast_async", "broadcast_async_",
    "synchronize", "poll", "register",
]

register()  # torch.distributed's "ringsync" backend
