"""reduce, gather and scatter: the collectives with a root, on numpy arrays and CPU torch tensors.

Forms and arguments as in _collectives: a blocking form and an *_async form returning a Handle;
`root` is a global rank. A rank whose output the collective does not write (a reduce's or a
gather's non-root) gets None from wait(), and its `out` is not used. GPU memory is not served
for these three yet (RingsyncError "UNSUPPORTED"): pass host memory.
"""

from . import _capi, _context, _names, _ops
from ._collectives import _blocks, _output, _submit
from ._tensors import View, as_out
from .errors import RingsyncError


class _Absent:
  """The buffer a rank does not pass to the library (NULL)."""
  pointer = None
  obj = None


_ABSENT = _Absent()


def _checked(kind, x, root):
  if isinstance(root, bool) or not isinstance(root, int):
    raise TypeError("root must be an int (a global rank), not %r" % (root,))
  size = _context.size()
  if not 0 <= root < size:
    raise ValueError("%s: root %d is not a rank of this job (ranks 0..%d)" % (kind, root, size - 1))
  view = View(x, kind)
  if view.device is not None:
    raise RingsyncError(
        "UNSUPPORTED",
        "%s of memory on device '%s' is not served yet: ringsync's %s takes host memory; pass "
        "tensor.cpu() (allreduce, broadcast, allgather, reduce_scatter and alltoall take GPU "
        "tensors)" % (kind, view.device, kind))
  return view, _context.rank() == root


def reduce_async(x, op=_ops.Sum, root=0, name=None, out=None):
  """Starts a reduce: rank `root`'s result is op(x of every rank), element-wise, as allreduce
  computes it (Average divides by size()). Every rank passes an x of the same dtype and number
  of elements. On root, `out` is as for allreduce (out=x: in place); on the other ranks wait()
  returns None and nothing of theirs is written."""
  code = _ops.op_code(op)
  view, is_root = _checked("reduce", x, root)
  if is_root:
    send, recv = _output("reduce", view, out, view.shape)
  else:
    send, recv = view.contiguous_copy("reduce"), _ABSENT
  tensor_name = _names.resolve("reduce", name)  # after the checks: a refused call takes no name
  lib = _capi.lib()
  return _submit("reduce", tensor_name,
                 lambda ctx, req: lib.rs_reduce_async(ctx, tensor_name, send.pointer, recv.pointer,
                                                      view.count, view.code, code, root, req),
                 recv.obj, (x, send.obj, recv.obj))


def reduce(x, op=_ops.Sum, root=0, name=None, out=None):
  """op(x of every rank) on rank `root`, None elsewhere; see reduce_async."""
  return reduce_async(x, op=op, root=root, name=name, out=out).wait()


def gather_async(x, root=0, name=None, out=None):
  """Starts a gather: rank `root`'s result is every rank's x concatenated along the first
  dimension in global rank order, shape (size() * x.shape[0], *x.shape[1:]) (a 0-d x gives
  (size(),)). Every rank passes the same shape. On the other ranks wait() returns None."""
  view, is_root = _checked("gather", x, root)
  if out is x:
    raise ValueError("gather cannot gather into its own input (out=x): the result is size() "
                     "times larger; pass out=None or a separate out")
  if is_root:
    shape = view.shape
    size = _context.size()
    send, recv = _output("gather", view, out, (size * shape[0],) + shape[1:] if shape else (size,))
  else:
    send, recv = view.contiguous_copy("gather"), _ABSENT
  tensor_name = _names.resolve("gather", name)
  lib = _capi.lib()
  return _submit("gather", tensor_name,
                 lambda ctx, req: lib.rs_gather_async(ctx, tensor_name, send.pointer, recv.pointer,
                                                      view.count, view.code, root, req),
                 recv.obj, (x, send.obj, recv.obj))


def gather(x, root=0, name=None, out=None):
  """Every rank's x concatenated on rank `root`, None elsewhere; see gather_async."""
  return gather_async(x, root=root, name=name, out=out).wait()


def scatter_async(x, root=0, name=None, out=None):
  """Starts a scatter: root's x is cut into size() blocks along its first dimension, and rank
  i's result is block i (shape (x.shape[0] // size(), *x.shape[1:])). Every rank passes an x of
  the same shape and dtype; only root's values are read. `out` may be any contiguous array of
  that many elements (not x itself)."""
  view, is_root = _checked("scatter", x, root)
  size = _context.size()
  count = _blocks("scatter", view, size)
  if out is x:
    raise ValueError("scatter cannot write into its own input (out=x): the result is size() "
                     "times smaller; pass out=None or a separate out")
  shape = (view.shape[0] // size,) + view.shape[1:]
  send = view.contiguous_copy("scatter") if is_root else _ABSENT
  recv = view.new(shape, "scatter") if out is None else as_out(out, view, count, "scatter")
  tensor_name = _names.resolve("scatter", name)
  lib = _capi.lib()
  return _submit("scatter", tensor_name,
                 lambda ctx, req: lib.rs_scatter_async(ctx, tensor_name, send.pointer, recv.pointer,
                                                       count, view.code, root, req),
                 recv.obj, (x, send.obj, recv.obj))


def scatter(x, root=0, name=None, out=None):
  """Block rank() of root's x; see scatter_async."""
  return scatter_async(x, root=root, name=name, out=out).wait()
