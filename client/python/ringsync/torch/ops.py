"""Collectives on torch tensors, Horovod-style: allreduce, allgather, broadcast.

The out-of-place forms are autograd functions, so a model may use them inside its forward
pass: allreduce's gradient is the same allreduce of the gradients, allgather's gradient is this
rank's slice of the summed gradients, broadcast's gradient is the summed gradients on the root
(zero elsewhere). The ``*_`` forms work in place and the ``*_async`` forms return a Handle;
neither records a graph.

As in Horovod, ``allreduce`` averages unless told otherwise (the core ``ringsync.allreduce``
sums). Names: ``name=None`` takes the core's automatic per-kind counter, so every rank must
then call the collectives in the same order.
"""

import torch

import ringsync as _core

from .compression import Compression
from .handle import Chained, Handle


def op_kind(op):
  """'sum', 'avg', 'min', 'max' or 'prod' for a ringsync op constant or op string."""
  table = {_core.Sum: "sum", _core.Average: "avg", _core.Min: "min", _core.Max: "max",
           _core.Product: "prod"}
  aliases = {"sum": "sum", "avg": "avg", "average": "avg", "mean": "avg", "min": "min",
             "max": "max", "prod": "prod", "product": "prod"}
  try:
    if op in table:
      return table[op]
  except TypeError:  # unhashable
    pass
  if isinstance(op, str) and op.lower() in aliases:
    return aliases[op.lower()]
  raise ValueError("unknown reduction op %r: use ringsync.torch.Sum, Average, Min, Max or Product"
                   % (op,))


def _resolve_op(average, op):
  """Horovod's rules: ``op`` wins; the deprecated ``average`` flag maps to Average/Sum."""
  if op is not None and average is not None:
    raise ValueError("pass either op or the deprecated average, not both")
  if op is not None:
    op_kind(op)
    return op
  if average is None or average:
    return _core.Average
  return _core.Sum


def _derived(name, suffix):
  return None if name is None else "%s.%s" % (name, suffix)


def _comm(tensor, flat=True):
  """The contiguous, detached tensor to hand to the core (bool travels as uint8; one dimension
  unless ``flat`` is False, so 0-d tensors work too)."""
  t = tensor.detach()
  if t.dtype == torch.bool:
    t = t.to(torch.uint8)
  t = t.contiguous()
  return t.reshape(-1) if flat else t


def _restore(result, like, flat=True):
  if flat:
    result = result.reshape(like.shape)
  return result.to(torch.bool) if like.dtype == torch.bool else result


def _copy_into(target, tensor):
  """The finishing step of an in-place collective that had to go through a temporary."""
  def finish(result):
    target.copy_(result)
    return tensor
  return finish


# --- allreduce -------------------------------------------------------------------------------

def _start_allreduce(tensor, op, name, compression, prescale, postscale):
  t = _comm(tensor)
  if prescale != 1.0:
    t = t * prescale
  wire, ctx = compression.compress(t)
  core_handle = _core.allreduce_async(wire, op=op, name=name)

  def finish(results):
    out = _restore(compression.decompress(results[0], ctx), tensor)
    if postscale != 1.0:
      out = out * postscale
    return out
  return Handle([core_handle], finish)


class _AllreduceFunction(torch.autograd.Function):
  @staticmethod
  def forward(ctx, tensor, op, name, compression, prescale, postscale):
    ctx.args = (op, name, compression, prescale, postscale)
    return _start_allreduce(tensor, op, name, compression, prescale, postscale).wait()

  @staticmethod
  def backward(ctx, grad_output):
    op, name, compression, prescale, postscale = ctx.args
    if op_kind(op) not in ("sum", "avg"):
      raise RuntimeError("allreduce with op %r has no gradient; only Sum and Average do" % (op,))
    grad = _start_allreduce(grad_output, op, _derived(name, "grad"), compression, prescale,
                            postscale).wait()
    return grad, None, None, None, None, None


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0):
  """Returns op(tensor of every rank) as a new tensor (Average unless ``op`` says otherwise).

  ``prescale_factor`` multiplies the input before the reduction, ``postscale_factor`` the result.
  Differentiable for Sum and Average.
  """
  op = _resolve_op(average, op)
  return _AllreduceFunction.apply(tensor, op, name, compression, prescale_factor,
                                  postscale_factor)


def allreduce_async(tensor, average=None, name=None, compression=Compression.none, op=None,
                    prescale_factor=1.0, postscale_factor=1.0):
  """Starts an allreduce; ``synchronize(handle)`` returns the result as a new tensor."""
  op = _resolve_op(average, op)
  return _start_allreduce(tensor, op, name, compression, prescale_factor, postscale_factor)


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0):
  """Starts an in-place allreduce; ``synchronize(handle)`` returns ``tensor`` holding the result."""
  op = _resolve_op(average, op)
  target = tensor.detach()
  direct = (target.is_contiguous() and target.dtype != torch.bool and prescale_factor == 1.0
            and postscale_factor == 1.0)
  if direct:  # the core reads and writes the tensor's own memory
    flat = target.view(-1)
    core_handle = _core.allreduce_async(flat, op=op, name=name, out=flat)
    return Handle([core_handle], lambda results: tensor)
  inner = _start_allreduce(tensor, op, name, Compression.none, prescale_factor, postscale_factor)
  return Chained(inner, _copy_into(target, tensor))


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0):
  """In-place allreduce; returns ``tensor``."""
  return allreduce_async_(tensor, average, name, op, prescale_factor, postscale_factor).wait()


# --- allgather -------------------------------------------------------------------------------

def _first_dims(tensor, name):
  """Every rank's first dimension, in rank order (one small allgather)."""
  mine = torch.tensor([tensor.shape[0]], dtype=torch.int64)
  return [int(d) for d in _core.allgather(mine, name=_derived(name, "dims")).tolist()]


def _start_allgather(tensor, name):
  if tensor.dim() == 0:
    raise ValueError("allgather needs a tensor with at least one dimension (got a scalar); "
                     "use tensor.reshape(1)")
  dims = _first_dims(tensor, name)
  longest = max(dims)
  t = _comm(tensor, flat=False)
  if t.shape[0] < longest:  # ranks differ: pad to the longest, cut the padding out afterwards
    pad = t.new_zeros((longest - t.shape[0],) + tuple(t.shape[1:]))
    t = torch.cat([t, pad])
  core_handle = _core.allgather_async(t, name=name)

  def finish(results):
    gathered = results[0]
    if any(d != longest for d in dims):
      gathered = torch.cat([gathered[r * longest:r * longest + d] for r, d in enumerate(dims)])
    return _restore(gathered, tensor, flat=False)
  handle = Handle([core_handle], finish)
  handle.dims = dims
  return handle


class _AllgatherFunction(torch.autograd.Function):
  @staticmethod
  def forward(ctx, tensor, name):
    handle = _start_allgather(tensor, name)
    ctx.name = name
    ctx.offset = sum(handle.dims[:_core.rank()])
    ctx.length = tensor.shape[0]
    return handle.wait()

  @staticmethod
  def backward(ctx, grad_output):
    summed = _start_allreduce(grad_output, _core.Sum, _derived(ctx.name, "grad"),
                              Compression.none, 1.0, 1.0).wait()
    return summed.narrow(0, ctx.offset, ctx.length), None


def allgather(tensor, name=None):
  """Concatenates every rank's tensor along dimension 0, in rank order (first dimensions may
  differ between ranks; the other dimensions must match). Differentiable."""
  return _AllgatherFunction.apply(tensor, name)


def allgather_async(tensor, name=None):
  """Starts an allgather; ``synchronize(handle)`` returns the result. Exchanging the first
  dimensions happens before this returns (one small collective)."""
  return _start_allgather(tensor, name)


# --- broadcast -------------------------------------------------------------------------------

def _start_broadcast(tensor, root_rank, name):
  core_handle = _core.broadcast_async(_comm(tensor), root=root_rank, name=name)
  return Handle([core_handle], lambda results: _restore(results[0], tensor))


class _BroadcastFunction(torch.autograd.Function):
  @staticmethod
  def forward(ctx, tensor, root_rank, name):
    ctx.root_rank = root_rank
    ctx.name = name
    return _start_broadcast(tensor, root_rank, name).wait()

  @staticmethod
  def backward(ctx, grad_output):
    summed = _start_allreduce(grad_output, _core.Sum, _derived(ctx.name, "grad"),
                              Compression.none, 1.0, 1.0).wait()
    if _core.rank() != ctx.root_rank:
      summed = torch.zeros_like(summed)
    return summed, None, None


def broadcast(tensor, root_rank=0, name=None):
  """Returns root_rank's tensor on every rank, as a new tensor. Differentiable: the root's
  gradient is the sum of every rank's gradient, the others' is zero."""
  return _BroadcastFunction.apply(tensor, root_rank, name)


def broadcast_async(tensor, root_rank=0, name=None):
  """Starts a broadcast; ``synchronize(handle)`` returns root_rank's tensor as a new tensor."""
  return _start_broadcast(tensor, root_rank, name)


def broadcast_async_(tensor, root_rank=0, name=None):
  """Starts an in-place broadcast into ``tensor``; ``synchronize(handle)`` returns ``tensor``."""
  target = tensor.detach()
  if target.is_contiguous() and target.dtype != torch.bool:
    flat = target.view(-1)
    core_handle = _core.broadcast_async(flat, root=root_rank, name=name, out=flat)
    return Handle([core_handle], lambda results: tensor)
  inner = _start_broadcast(tensor, root_rank, name)
  return Chained(inner, _copy_into(target, tensor))


def broadcast_(tensor, root_rank=0, name=None):
  """In-place broadcast: ``tensor`` receives root_rank's values. Returns ``tensor``."""
  return broadcast_async_(tensor, root_rank, name).wait()
