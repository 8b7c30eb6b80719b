"""Making every rank start from the same model: parameters, optimizer state, Python objects."""

import io
import pickle

import torch

import ringsync as _core

from .ops import broadcast_async_


def _named_tensors(params):
  if isinstance(params, dict):
    items = list(params.items())
  else:
    try:
      items = list(params)
    except TypeError:
      raise TypeError("broadcast_parameters expects a state_dict or (name, tensor) pairs such as "
                      "model.named_parameters(), got %s" % type(params).__name__) from None
    if any(not isinstance(item, tuple) or len(item) != 2 for item in items):
      raise TypeError("broadcast_parameters expects (name, tensor) pairs such as "
                      "model.named_parameters(); for model.parameters() use "
                      "list(model.named_parameters()) or model.state_dict()")
  names = [name for name, _ in items]
  if len(set(names)) != len(names):
    dups = sorted({n for n in names if names.count(n) > 1})
    raise ValueError("broadcast_parameters: duplicate names %s" % ", ".join(map(str, dups)))
  for name, value in items:
    if value is not None and not torch.is_tensor(value):
      raise TypeError("broadcast_parameters: %r is a %s, not a tensor"
                      % (name, type(value).__name__))
  return [(str(name), value) for name, value in items if value is not None]


def broadcast_parameters(params, root_rank=0, prefix="broadcast_parameters"):
  """Overwrites every tensor in ``params`` with root_rank's values, in place.

  ``params``: a ``model.state_dict()`` (parameters and buffers) or (name, tensor) pairs such as
  ``model.named_parameters()``. Names must match across ranks (they name the collectives).
  All broadcasts run concurrently; this returns once every one has finished.
  """
  handles = [broadcast_async_(tensor, root_rank, name="%s.%s" % (prefix, name))
             for name, tensor in _named_tensors(params)]
  for handle in handles:
    handle.wait()


def broadcast_object(obj, root_rank=0, name="broadcast_object"):
  """Returns root_rank's ``obj`` on every rank (pickled on the root; other ranks' ``obj`` is
  ignored). Two small collectives: the length, then the bytes."""
  if _core.rank() == root_rank:
    buffer = io.BytesIO()
    pickle.dump(obj, buffer, protocol=pickle.HIGHEST_PROTOCOL)
    payload = torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)
    length = torch.tensor([payload.numel()], dtype=torch.int64)
  else:
    length = torch.zeros(1, dtype=torch.int64)
  broadcast_async_(length, root_rank, name=name + ".length").wait()
  if _core.rank() != root_rank:
    payload = torch.empty(int(length[0]), dtype=torch.uint8)
  broadcast_async_(payload, root_rank, name=name + ".bytes").wait()
  if _core.rank() == root_rank:
    return obj
  return pickle.loads(payload.numpy().tobytes())


class _TensorSlot:
  """Stands for one tensor of the optimizer state while its structure travels by pickle.
  `device_type` is the root's ("cpu", "cuda"): every rank receives the tensor in the same
  kind of memory, as the local ranks of one collective must pass."""

  def __init__(self, index, shape, dtype, device_type="cpu"):
    self.index, self.shape, self.dtype = index, shape, dtype
    self.device_type = device_type

  def empty(self):
    """A tensor to receive the root's: on the CPU, or on this rank's current CUDA device."""
    device = "cpu" if self.device_type == "cpu" else torch.device(
        self.device_type, torch.cuda.current_device())
    return torch.empty(self.shape, dtype=self.dtype, device=device)


def _strip_tensors(value, tensors):
  if torch.is_tensor(value):
    tensors.append(value)
    return _TensorSlot(len(tensors) - 1, tuple(value.shape), value.dtype, value.device.type)
  return _map_containers(value, lambda v: _strip_tensors(v, tensors))


def _fill_tensors(value, tensors):
  if isinstance(value, _TensorSlot):
    return tensors[value.index]
  return _map_containers(value, lambda v: _fill_tensors(v, tensors))


def _map_containers(value, fn):
  """``fn`` applied to the items of a dict, list or tuple (namedtuples included); other values
  unchanged."""
  if isinstance(value, dict):
    return {k: fn(v) for k, v in value.items()}
  if isinstance(value, tuple) and hasattr(value, "_fields"):
    return type(value)(*[fn(v) for v in value])
  if isinstance(value, (list, tuple)):
    return type(value)(fn(v) for v in value)
  return value


def broadcast_optimizer_state(optimizer, root_rank=0, name="broadcast_optimizer_state"):
  """Gives every rank root_rank's optimizer state: hyper-parameters (lr, momentum, betas, ...),
  per-parameter state tensors (momentum buffers, Adam moments, step counts) and scalars.

  The structure and the scalars travel pickled (exact values: Horovod's float32 round trip of
  e.g. the learning rate does not happen here), the tensors by broadcast in their own dtype.
  The other ranks then ``load_state_dict()`` it, which checks that the models match. An
  optimizer that has not stepped yet has no state; the others then get none either (no zero
  gradient step is taken to create it, so weight decay does not move the weights).
  Works for any optimizer whose ``state_dict()`` holds tensors, numbers, strings and
  containers of them (LBFGS included).
  """
  tensors = []
  is_root = _core.rank() == root_rank
  skeleton = _strip_tensors(optimizer.state_dict(), tensors) if is_root else None
  skeleton = broadcast_object(skeleton, root_rank, name=name + ".structure")
  if not is_root:
    slots = []
    _collect_slots(skeleton, slots)
    tensors = [None] * len(slots)
    for slot in slots:
      tensors[slot.index] = slot.empty()
  handles = [broadcast_async_(t, root_rank, name="%s.%d" % (name, i))
             for i, t in enumerate(tensors)]
  for handle in handles:
    handle.wait()
  if not is_root:
    optimizer.load_state_dict(_fill_tensors(skeleton, tensors))


def _collect_slots(value, slots):
  if isinstance(value, _TensorSlot):
    slots.append(value)
  else:
    _map_containers(value, lambda v: _collect_slots(v, slots))
