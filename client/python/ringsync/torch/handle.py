"""An asynchronous collective on tensors: the core's handles plus the work left after them."""

import time


def _remaining(deadline):
  """Seconds left until `deadline` (None: no limit), never negative."""
  return None if deadline is None else max(0.0, deadline - time.monotonic())


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
    """The result. With ``timeout`` (seconds, for all core handles together), raises
    TimeoutError when the collective has not completed by then; wait again later."""
    if not self._waited:
      deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
      # A core handle that completed keeps its result: after a TimeoutError, waiting again
      # does not wait for it again.
      results = [h.wait(_remaining(deadline)) for h in self._core_handles]
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
    super().__init__([], None)
    self._inner = inner
    self._then = finish

  def done(self):
    return self._waited or self._inner.done()

  def wait(self, timeout=None):
    if not self._waited:
      self._result = self._then(self._inner.wait(timeout))
      self._waited = True
      self._inner = None
      self._then = None
    return self._result
