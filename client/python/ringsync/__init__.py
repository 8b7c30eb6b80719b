"""ringsync: collectives for trainer processes, served by the ringsyncd daemon of each node.

    import ringsync as rs
    rs.init()                        # the launcher's environment says where the daemon is
    total = rs.allreduce(x)          # x: numpy.ndarray, torch.Tensor (CPU or CUDA)
    rs.allreduce(x, op=rs.Average, out=x)            # in place
    h = rs.allgather_async(x); ...; gathered = h.wait()
    buf = rs.empty((1024,), "float32")  # daemon shared memory: collectives copy nothing

A thin ctypes layer over libringsync.so's C ABI (no compiled extension: one package for every
CPython >= 3.9). numpy and torch are optional. See docs/python.md for the reference.
"""

from ._empty import empty
from ._collectives import (allgather, allgather_async, allreduce, allreduce_async, alltoall,
                           alltoall_async, barrier, barrier_async, broadcast, broadcast_async,
                           reduce_scatter, reduce_scatter_async)
from ._context import (init, is_initialized, local_rank, local_size, node_rank, num_nodes, rank,
                       shutdown, size)
from ._handle import Handle
from ._ops import Average, Max, Min, Product, ReduceOp, Sum
from ._registration import register_device, unregister_device
from ._rooted import gather, gather_async, reduce, reduce_async, scatter, scatter_async
from .errors import LibraryNotFoundError, RingsyncError

__version__ = "0.1.0"

__all__ = [
    "init", "shutdown", "is_initialized",
    "rank", "size", "local_rank", "local_size", "node_rank", "num_nodes",
    "Sum", "Average", "Min", "Max", "Product", "ReduceOp",
    "allreduce", "allreduce_async", "broadcast", "broadcast_async",
    "allgather", "allgather_async", "reduce_scatter", "reduce_scatter_async",
    "alltoall", "alltoall_async", "barrier", "barrier_async",
    "reduce", "reduce_async", "gather", "gather_async", "scatter", "scatter_async",
    "Handle", "empty", "library_path", "register_device", "unregister_device",
    "RingsyncError", "LibraryNotFoundError",
]


def library_path():
  """The path of the libringsync.so this process uses (loads it if need be).

  Raises LibraryNotFoundError listing every place tried when there is none.
  """
  from . import _capi, _library
  _capi.lib()
  return _library.load()[1]
