"""allreduce, broadcast, allgather, reduce_scatter, alltoall and barrier on numpy arrays, torch tensors (CPU or CUDA) and
GPU arrays with __cuda_array_interface__.

Each collective has a blocking form and an *_async form returning a Handle; the blocking
form is the async one followed by wait(). `out=None` returns a new array or tensor; `out=x`
works in place (x must then be contiguous); any other `out` (contiguous, same dtype and
number of elements as the result) receives the result. Non-contiguous inputs of an
out-of-place call are copied to contiguous memory first.

The library copies host data outside the daemon's shared memory through a bounce buffer; data
inside buffers from ringsync.empty() moves with no copy at all. GPU memory is read and written
by the daemon on the device (_devices.route() says which calls take that path).
"""

import ctypes

from . import _capi, _context, _devices, _names, _ops
from ._handle import Handle
from ._tensors import View, as_out


def _output(kind, view, out, shape):
  """(send view, recv view) for an input view and the caller's `out`."""
  count = 1
  for d in shape:
    count *= d
  if out is None:
    return view.contiguous_copy(kind), view.new(shape, kind)
  if out is view.obj:
    if not view.contiguous:
      raise ValueError("%s in place (out=x) needs a contiguous x: the library reads and writes "
                       "its memory in one piece; pass out=None for a new result, or use "
                       "x.contiguous() / numpy.ascontiguousarray(x)" % kind)
    if not view.writeable:
      raise ValueError("%s in place (out=x): x is read-only" % kind)
    return view, view
  return view.contiguous_copy(kind), as_out(out, view, count, kind)


def _submit(kind, name, start, result, keep, device=None):
  """Calls `start(ctx, request_ptr)` (a C *_async function) and wraps the request. `device`:
  the DeviceCall of a collective on GPU memory (_devices.route()), else None."""
  request = _capi.c_req_p()
  with _context.use() as connection:  # shutdown() waits for it: ctx stays valid meanwhile
    connection.buffers.free_pending(connection)
    connection.devices.reap()

    def submit():
      _capi.call(start, connection.ctx, ctypes.byref(request))
    if device is None:
      submit()
    else:
      connection.devices.submit(connection.ctx, device, submit)
  return Handle(request, kind, name.decode("utf-8", "replace"), result, keep, connection,
                device=device is not None)


def allreduce_async(x, op=_ops.Sum, name=None, out=None):
  """Starts an allreduce: every rank's result is op(x of every rank), element-wise.

  op: ringsync.Sum, Average, Min, Max, Product (or "sum", "avg", "min", "max", "prod"). Average
  divides the sum by size() (integers: truncating division). Returns a Handle whose wait()
  returns the result.
  """
  code = _ops.op_code(op)
  view = View(x, "allreduce")
  send, recv = _output("allreduce", view, out, view.shape)
  device = _devices.route("allreduce", view, send, recv)
  tensor_name = _names.resolve("allreduce", name)  # after the checks: a refused call takes no name
  lib = _capi.lib()
  return _submit("allreduce", tensor_name,
                 lambda ctx, req: lib.rs_allreduce_async(ctx, tensor_name, send.pointer,
                                                         recv.pointer, view.count, view.code,
                                                         code, req),
                 recv.obj, (x, send.obj, recv.obj), device)


def allreduce(x, op=_ops.Sum, name=None, out=None):
  """op(x of every rank), element-wise; see allreduce_async. Returns the result."""
  return allreduce_async(x, op=op, name=name, out=out).wait()


def broadcast_async(x, root=0, name=None, out=None):
  """Starts a broadcast: every rank's result is x of rank `root` (a global rank).

  Every rank passes an x of the same dtype and number of elements; only the root's values are
  read. Returns a Handle whose wait() returns the result.
  """
  if isinstance(root, bool) or not isinstance(root, int):
    raise TypeError("root must be an int (a global rank), not %r" % (root,))
  view = View(x, "broadcast")
  send, recv = _output("broadcast", view, out, view.shape)
  device = _devices.route("broadcast", view, send, recv)
  tensor_name = _names.resolve("broadcast", name)  # after the checks: a refused call takes no name
  lib = _capi.lib()
  return _submit("broadcast", tensor_name,
                 lambda ctx, req: lib.rs_broadcast_async(ctx, tensor_name, send.pointer,
                                                         recv.pointer, view.count, view.code,
                                                         root, req),
                 recv.obj, (x, send.obj, recv.obj), device)


def broadcast(x, root=0, name=None, out=None):
  """x of rank `root` on every rank; see broadcast_async. Returns the result."""
  return broadcast_async(x, root=root, name=name, out=out).wait()


def allgather_async(x, name=None, out=None):
  """Starts an allgather: every rank's x, concatenated along the first dimension in global
  rank order. Every rank passes the same shape; the result has shape
  (size() * x.shape[0], *x.shape[1:]) (a 0-d x gives shape (size(),)).

  `out` may be any contiguous array of that many elements; an `out` whose rank-th slice is x
  itself gathers in place. Returns a Handle whose wait() returns the result.
  """
  view = View(x, "allgather")
  shape = view.shape
  size = _context.size()
  result_shape = (size * shape[0],) + shape[1:] if shape else (size,)
  if out is x:
    raise ValueError("allgather cannot gather into its own input (out=x): the result is "
                     "size() times larger; pass out=None, or an out whose rank-th slice is x")
  send, recv = _output("allgather", view, out, result_shape)
  device = _devices.route("allgather", view, send, recv)
  tensor_name = _names.resolve("allgather", name)
  lib = _capi.lib()
  return _submit("allgather", tensor_name,
                 lambda ctx, req: lib.rs_allgather_async(ctx, tensor_name, send.pointer,
                                                         recv.pointer, view.count, view.code,
                                                         req),
                 recv.obj, (x, send.obj, recv.obj), device)


def allgather(x, name=None, out=None):
  """Every rank's x concatenated along the first dimension; see allgather_async."""
  return allgather_async(x, name=name, out=out).wait()


def _blocks(kind, view, size):
  """Elements per rank of an input cut into size() blocks along its first dimension."""
  shape = view.shape
  if not shape or shape[0] % size != 0:
    raise ValueError("%s: the input's first dimension (%s) must split into %d equal blocks, one "
                     "per rank" % (kind, shape[0] if shape else "a 0-d input has none", size))
  return view.count // size


def reduce_scatter_async(x, op=_ops.Sum, name=None, out=None):
  """Starts a reduce-scatter: x is cut into size() blocks along its first dimension; rank i's
  result is op over block i of every rank's x (shape (x.shape[0] // size(), *x.shape[1:])).

  `out` may be any contiguous array of that many elements (not x itself). Average divides by
  size() (integers: truncating). Returns a Handle whose wait() returns the result.
  """
  code = _ops.op_code(op)
  view = View(x, "reduce_scatter")
  size = _context.size()
  count = _blocks("reduce_scatter", view, size)
  if out is x:
    raise ValueError("reduce_scatter cannot write into its own input (out=x): the result is "
                     "size() times smaller; pass out=None or a separate out")
  send, recv = _output("reduce_scatter", view, out, (view.shape[0] // size,) + view.shape[1:])
  device = _devices.route("reduce_scatter", view, send, recv)
  tensor_name = _names.resolve("reduce_scatter", name)
  lib = _capi.lib()
  return _submit("reduce_scatter", tensor_name,
                 lambda ctx, req: lib.rs_reduce_scatter_async(ctx, tensor_name, send.pointer,
                                                              recv.pointer, count, view.code,
                                                              code, req),
                 recv.obj, (x, send.obj, recv.obj), device)


def reduce_scatter(x, op=_ops.Sum, name=None, out=None):
  """op over block rank() of every rank's x; see reduce_scatter_async. Returns the result."""
  return reduce_scatter_async(x, op=op, name=name, out=out).wait()


def alltoall_async(x, name=None, out=None):
  """Starts an alltoall: x is cut into size() blocks along its first dimension; block j goes to
  rank j, and block i of the result (same shape as x) comes from rank i.

  `out` may be any contiguous array of as many elements, but not x itself: alltoall has no
  in-place form. Returns a Handle whose wait() returns the result.
  """
  view = View(x, "alltoall")
  count = _blocks("alltoall", view, _context.size())
  if out is x:
    raise ValueError("alltoall cannot run in place (out=x): every block of the result is "
                     "another rank's input; pass out=None or a separate out")
  send, recv = _output("alltoall", view, out, view.shape)
  device = _devices.route("alltoall", view, send, recv)
  tensor_name = _names.resolve("alltoall", name)
  lib = _capi.lib()
  return _submit("alltoall", tensor_name,
                 lambda ctx, req: lib.rs_alltoall_async(ctx, tensor_name, send.pointer,
                                                        recv.pointer, count, view.code, req),
                 recv.obj, (x, send.obj, recv.obj), device)


def alltoall(x, name=None, out=None):
  """Block j of x to rank j, block i of the result from rank i; see alltoall_async."""
  return alltoall_async(x, name=name, out=out).wait()


def barrier_async(name=None):
  """Starts a barrier: completes once every rank of the job has entered it. wait() returns
  None."""
  tensor_name = _names.resolve("barrier", name)
  lib = _capi.lib()
  return _submit("barrier", tensor_name,
                 lambda ctx, req: lib.rs_barrier_async(ctx, tensor_name, req), None, None)


def barrier(name=None):
  """Blocks until every rank of the job has entered the barrier."""
  barrier_async(name=name).wait()
