"""Gradient buckets: parameters whose gradients travel together in one allreduce.

A bucket owns one flat buffer in the wire dtype on its parameters' device (for CPU parameters
daemon shared memory from ringsync.empty(), for CUDA parameters GPU memory the daemon maps; the
daemon reads either without a copy through this process): every parameter's gradient at its offset,
then one "has a gradient" flag per parameter. The flags let every rank tell a gradient that is
zero from a parameter no rank computed a gradient for, which must keep ``p.grad = None`` (as it
would in single-process training, where the optimizer then skips it).
"""

import torch

import ringsync as _core


def plan_buckets(named_params, compression, bucket_bytes):
  """Splits (name, parameter) pairs, in the order their gradients are expected (reverse
  registration order), into lists of at most ~bucket_bytes wire bytes, one wire dtype and one
  device each. A parameter larger than bucket_bytes gets a bucket of its own. Returns
  [(wire dtype, device, pairs)]."""
  buckets = []
  open_bucket = {}  # (wire dtype, device) -> [pairs, bytes]
  for name, p in named_params:
    dtype = compression.wire_dtype(p.dtype)
    key = (dtype, p.device)
    size = p.numel() * torch.empty((), dtype=dtype).element_size()
    current = open_bucket.get(key)
    if current is not None and current[1] + size > bucket_bytes:
      current = None
    if current is None:
      current = [[], 0]
      open_bucket[key] = current
      buckets.append((dtype, p.device, current[0]))
    current[0].append((name, p))
    current[1] += size
  return buckets


def _allocate(numel, dtype, device):
  """A zeroed 1-D tensor: on a GPU, GPU memory on that device; on the CPU, daemon shared
  memory, or plain memory (bounced: one copy each way per allreduce) when the daemon has no
  shared memory left. Returns (tensor, zero_copy)."""
  if device.type != "cpu":
    return torch.zeros(numel, dtype=dtype, device=device), True
  try:
    return _core.empty((numel,), dtype, framework="torch").zero_(), True
  except _core.RingsyncError as error:
    if error.status != "OUT_OF_MEMORY":
      raise
  return torch.zeros(numel, dtype=dtype), False


class Bucket:
  def __init__(self, name, wire_dtype, named_params, device=None):
    self.name = name
    self.wire_dtype = wire_dtype
    self.device = torch.device("cpu") if device is None else torch.device(device)
    self.names = [n for n, _ in named_params]
    self.params = [p for _, p in named_params]
    self.index_of = {p: i for i, p in enumerate(self.params)}
    self.offsets = []
    total = 0
    for p in self.params:
      self.offsets.append(total)
      total += p.numel()
    self.numel = total
    self.buffer = None
    self.zero_copy = False
    self.ready = [False] * len(self.params)
    self.ready_count = 0
    self.handle = None

  @property
  def started(self):
    return self.handle is not None

  def _slice(self, i):
    return self.buffer[self.offsets[i]:self.offsets[i] + self.params[i].numel()]

  def _ensure_buffer(self):
    if self.buffer is None:
      self.buffer, self.zero_copy = _allocate(self.numel + len(self.params), self.wire_dtype,
                                              self.device)
    return self.buffer

  def add_gradient(self, p):
    """Copies p.grad into the buffer. True when that completed the bucket."""
    i = self.index_of[p]
    if self.ready[i]:
      return False
    self._put(i, p.grad)
    self.ready[i] = True
    self.ready_count += 1
    return self.ready_count == len(self.params)

  def _put(self, i, grad):
    self._ensure_buffer()
    if grad is None:
      self._slice(i).zero_()
      self.buffer[self.numel + i] = 0
      return
    if grad.is_sparse:
      raise RuntimeError("DistributedOptimizer: parameter %r has a sparse gradient; sparse "
                         "gradients are not supported (use a dense layer, e.g. "
                         "nn.Embedding(sparse=False))" % self.names[i])
    self._slice(i).copy_(grad.detach().reshape(-1))
    self.buffer[self.numel + i] = 1

  def fill_missing(self):
    """For parameters whose hook did not complete: their current p.grad (accumulated passes,
    or a zeroed grad), else zeros flagged as 'no gradient'."""
    for i, p in enumerate(self.params):
      if not self.ready[i]:
        self._put(i, p.grad)
        self.ready[i] = True
    self.ready_count = len(self.params)

  def start(self, op):
    buffer = self._ensure_buffer()
    self.handle = _core.allreduce_async(buffer, op=op, name=self.name, out=buffer)

  def finish(self):
    """Waits for the allreduce and writes the result into every p.grad (cast back to the
    parameter's dtype). A parameter no rank had a gradient for keeps p.grad as it was (None)."""
    self.handle.wait()  # on failure the handle stays, for drain()
    self.handle = None
    flags = self.buffer[self.numel:].tolist()
    with torch.no_grad():
      for i, p in enumerate(self.params):
        if flags[i] == 0:
          continue
        result = self._slice(i).view(p.shape)
        if p.grad is None:
          p.grad = result.to(device=p.device, dtype=p.dtype, copy=True)
        else:
          p.grad.copy_(result)

  def drain(self):
    """Waits for a started allreduce whose result is not wanted (another bucket failed),
    ignoring how it ended: until it has completed the daemon may still write the buffer, so
    the next step must not refill it before."""
    if self.handle is None:
      return
    try:
      self.handle.wait()
    except _core.RingsyncError:
      pass
    self.handle = None

  def reset(self):
    self.ready = [False] * len(self.params)
    self.ready_count = 0
    self.handle = None
