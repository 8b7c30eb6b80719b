"""An asynchronous collective on tensors: the core's handles plus the work left after them."""


class Handle:
  """Returned by the ``*_async`` functions. ``wait()`` (or ``synchronize(handle)``) returns the
  result; ``done()`` (or ``poll(handle)``) says whether ``wait()`` would return at once.

  ``finish`` turns the core results (one per core handle, in order) into the caller's result
  (decompression, scaling, copying back into a non-contiguous tensor, ...). It runs once.
  """

  def __init__(self, core_handles, finish):
    self._core_handles = list(core_handles)
    self._finish = finish
    self._waited = False
    self._result = None

  def done(self):
    return self._waited or all(h.done() for h in self._core_handles)

  def wait(self, timeout=None):
    if not self._waited:
      results = [h.wait(timeout) for h in self._core_handles]
      self._result = self._finish(results)
      self._waited = True
      self._core_handles = []
      self._finish = None
    return self._result


def synchronize(handle):
  """Waits for an asynchronous collective and returns its result (Horovod's ``synchronize``)."""
  return handle.wait()


def poll(handle):
  """True when the collective has finished and ``synchronize(handle)`` will not block."""
  return handle.done()


class Chained(Handle):
  """A Handle finishing another one, then applying ``finish`` to its result."""

  def __init__(self, inner, finish):
    super().__init__([], lambda _: finish(inner.wait()))
    self._inner = inner

  def done(self):
    return self._waited or self._inner.done()
