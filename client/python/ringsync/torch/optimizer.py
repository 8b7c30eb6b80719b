"""DistributedOptimizer: an optimizer whose step() uses gradients averaged over every rank.

Gradients are reduced while backward still runs: a hook on each parameter's gradient
accumulator copies the new gradient into its bucket, and the bucket's allreduce starts as soon
as its last gradient has arrived, so early buckets travel while autograd computes the rest.
step() (or synchronize()) waits for every bucket and writes the results back into p.grad.
"""

import contextlib
import weakref

import torch

import ringsync as _core

from .buckets import Bucket, plan_buckets
from .compression import Compression
from .events import EventLog
from .ops import op_kind


def _named_parameters(optimizer_groups, named_parameters):
  """Validated (name, parameter) pairs for every parameter of the optimizer, in registration
  order (the order of named_parameters when given, else the optimizer's)."""
  in_optimizer = [p for group in optimizer_groups for p in group["params"]]
  if named_parameters is None:
    return [("noname.%d.%d" % (g, i), p)
            for g, group in enumerate(optimizer_groups) for i, p in enumerate(group["params"])]
  named = list(named_parameters)
  if any(not isinstance(item, tuple) or len(item) != 2 for item in named):
    raise ValueError("named_parameters must be (name, parameter) pairs, usually "
                     "model.named_parameters()")
  names = [name for name, _ in named]
  duplicates = sorted({n for n in names if names.count(n) > 1})
  if duplicates:
    raise ValueError("parameter names in named_parameters must be unique; duplicates: %s"
                     % ", ".join(map(str, duplicates)))
  seen = {}
  for name, p in named:
    if id(p) in seen:
      raise ValueError("parameter %r appears in named_parameters again as %r" % (seen[id(p)], name))
    seen[id(p)] = name
  unnamed = [p for p in in_optimizer if id(p) not in seen]
  if unnamed:
    raise ValueError("named_parameters was given but %d of the optimizer's parameters are not in "
                     "it (shapes %s); pass model.named_parameters() of the model the optimizer "
                     "was built for" % (len(unnamed), ", ".join(str(tuple(p.shape))
                                                                for p in unnamed[:5])))
  wanted = {id(p) for p in in_optimizer}
  return [(str(name), p) for name, p in named if id(p) in wanted]


def _make_hook(optimizer_ref, p):
  def hook(*_):
    optimizer = optimizer_ref()
    if optimizer is not None:
      optimizer._rs_gradient_ready(p)
  return hook


def _remove_hooks(hooks):
  for handle in hooks:
    handle.remove()


class _DistributedOptimizer:
  """Mixed in before the wrapped optimizer's class (see DistributedOptimizer())."""

  def __init__(self, optimizer, named_parameters, compression, backward_passes_per_step, op,
               bucket_bytes):
    super().__init__(optimizer.param_groups)
    self.defaults = optimizer.defaults
    self.state.update(optimizer.state)
    if op_kind(op) not in ("sum", "avg"):
      raise ValueError("DistributedOptimizer reduces gradients with Average or Sum, not %r" % (op,))
    if backward_passes_per_step < 1:
      raise ValueError("backward_passes_per_step must be at least 1")
    self.op = op
    self.compression = compression
    self.backward_passes_per_step = int(backward_passes_per_step)
    self.event_log = EventLog()
    named = [(n, p) for n, p in _named_parameters(self.param_groups, named_parameters)
             if p.requires_grad]
    self._rs_names = {p: n for n, p in named}
    self._rs_buckets = []
    self._rs_bucket_of = {}
    for dtype, device, pairs in plan_buckets(list(reversed(named)), compression, bucket_bytes):
      first = pairs[0][0]
      name = "grad.%s" % first if len(pairs) == 1 else "grad.%s+%d" % (first, len(pairs) - 1)
      bucket = Bucket(name, dtype, pairs, device)
      self._rs_buckets.append(bucket)
      for _, p in pairs:
        self._rs_bucket_of[p] = bucket
    self._rs_passes = {p: 0 for _, p in named}
    self._rs_synchronized = False
    self._rs_should_synchronize = True
    self._rs_end_queued = False
    self._rs_grad_accs = []  # a parameter holds its accumulator weakly: keep it alive
    hooks = []
    with torch.enable_grad():
      for _, p in named:
        accumulator = p.expand_as(p).grad_fn.next_functions[0][0]
        hooks.append(accumulator.register_hook(_make_hook(weakref.ref(self), p)))
        self._rs_grad_accs.append(accumulator)
    # The hooks reach this optimizer only through a weak reference, so dropping it frees it,
    # and its hooks go with it: a new DistributedOptimizer over the same model can replace it.
    weakref.finalize(self, _remove_hooks, hooks)

  # --- during backward -------------------------------------------------------------------------

  def _rs_gradient_ready(self, p):
    name = self._rs_names[p]
    passes = self._rs_passes[p] + 1
    if passes > self.backward_passes_per_step:
      raise RuntimeError(
          "DistributedOptimizer: the gradient of %r was computed %d times before step() or "
          "synchronize() (backward_passes_per_step=%d): call step() after each backward, or "
          "raise backward_passes_per_step to accumulate locally"
          % (name, passes, self.backward_passes_per_step))
    self._rs_passes[p] = passes
    self._rs_synchronized = False
    self.event_log.record("hook", name)
    self._rs_queue_backward_end()
    if passes < self.backward_passes_per_step or p.grad is None:
      return
    bucket = self._rs_bucket_of[p]
    if bucket.add_gradient(p):
      bucket.start(self.op)
      self.event_log.record("allreduce", bucket.name)

  def _rs_queue_backward_end(self):
    """Records the end of this backward pass (autograd's end-of-pass callback; the hook runs
    inside the pass, where queueing is allowed)."""
    if self._rs_end_queued:
      return
    engine = getattr(torch.autograd.Variable, "_execution_engine", None)
    if engine is None or not hasattr(engine, "queue_callback"):  # a private API: optional
      return
    self._rs_end_queued = True

    def ended():
      self._rs_end_queued = False
      self.event_log.record("backward_end")
    engine.queue_callback(ended)

  # --- after backward --------------------------------------------------------------------------

  def synchronize(self):
    """Finishes every bucket's allreduce and writes the averaged (or summed) gradients into
    p.grad. Buckets that did not start during backward (a parameter without gradient, fewer
    backward passes than backward_passes_per_step) start here, so every rank issues the same
    collectives.

    When one bucket fails (e.g. RingsyncError "MISMATCH"), the others still running are waited
    for (the daemon writes their buffers until they complete) and the first error is raised.
    After an interruption (KeyboardInterrupt) the unfinished buckets stay started instead:
    zero_grad() refuses, and the next synchronize() or step() finishes them.
    """
    try:
      for bucket in self._rs_buckets:
        if not bucket.started:
          bucket.fill_missing()
          bucket.start(self.op)
          self.event_log.record("allreduce_at_sync", bucket.name)
      for bucket in self._rs_buckets:
        bucket.finish()
    except Exception:
      # Before the buffers are refilled. A drain interrupted in turn leaves its bucket started.
      for bucket in self._rs_buckets:
        bucket.drain()
      raise
    finally:
      for bucket in self._rs_buckets:
        if not bucket.started:
          bucket.reset()
      if not any(bucket.started for bucket in self._rs_buckets):
        for p in self._rs_passes:
          self._rs_passes[p] = 0
    self._rs_synchronized = True
    self.event_log.record("synchronize")

  @contextlib.contextmanager
  def skip_synchronize(self):
    """Inside this context step() does not synchronize (Horovod's; step() after synchronize()
    does not synchronize again anyway, until the next backward)."""
    self._rs_should_synchronize = False
    try:
      yield
    finally:
      self._rs_should_synchronize = True

  def step(self, closure=None):
    if self._rs_should_synchronize and not self._rs_synchronized:
      self.synchronize()
    self._rs_synchronized = False
    result = super().step(closure)
    self.event_log.record("step")
    self.event_log.end_step()
    return result

  def zero_grad(self, *args, **kwargs):
    # Arguments as the wrapped optimizer takes them: set_to_none's default differs between
    # torch versions (False before 2.0, True since).
    if any(bucket.started for bucket in self._rs_buckets):
      raise RuntimeError("DistributedOptimizer: zero_grad() was called after backward() but "
                         "before step() or synchronize(), while gradients are being reduced; "
                         "call step() (or synchronize()) first")
    return super().zero_grad(*args, **kwargs)

  def set_backward_passes_per_step(self, passes):
    if passes < 1:
      raise ValueError("backward_passes_per_step must be at least 1")
    self.backward_passes_per_step = int(passes)

  def load_state_dict(self, state_dict):
    if any(bucket.started for bucket in self._rs_buckets):
      raise RuntimeError("DistributedOptimizer: load_state_dict() while gradients are being "
                         "reduced; call step() or synchronize() first")
    for p in self._rs_passes:
      self._rs_passes[p] = 0
    for bucket in self._rs_buckets:
      bucket.reset()
    self._rs_synchronized = False
    return super().load_state_dict(state_dict)

  @property
  def buckets(self):
    """(bucket name, [parameter names]) in the order gradients are expected."""
    return [(bucket.name, list(bucket.names)) for bucket in self._rs_buckets]


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=_core.Average, bucket_bytes=25 * 2**20):
  """Wraps ``optimizer`` so that step() applies gradients averaged (``op=Sum``: summed) over
  every rank. Returns an optimizer of the same class (isinstance checks and LR schedulers keep
  working) sharing its parameter groups and state; use it instead of the original.

  named_parameters: ``model.named_parameters()``; the names name the collectives, so they must
    match across ranks (without it, parameters are named by position in the optimizer).
  compression: ``Compression.fp16`` sends float32/float64 gradients as float16.
  backward_passes_per_step: gradients accumulate locally for this many backward passes; the
    allreduce starts in the last one (gradients are summed over passes, not averaged).
  bucket_bytes: gradients are fused into buckets of about this many wire bytes, filled in
    reverse registration order (the order backward produces them).
  """
  cls = type(optimizer.__class__.__name__, (_DistributedOptimizer, optimizer.__class__), {})
  return cls(optimizer, named_parameters, compression, backward_passes_per_step, op, bucket_bytes)
