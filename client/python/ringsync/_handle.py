"""Handle: an asynchronous collective, waited on with wait() or polled with done()."""

import threading
import time

from . import _buffers, _capi
from .errors import IN_PROGRESS, SUCCESS

# A wait without a timeout still returns to Python this often, so that Ctrl-C (a signal
# handler raising KeyboardInterrupt) is not held off by a collective that never completes.
_WAIT_SLICE_MS = 200


class Handle:
  """A collective started by one of the *_async functions.

  wait() returns its result (the output array or tensor; None for a barrier) or raises the
  RingsyncError it failed with; done() says whether wait() would return at once. A handle
  keeps its input and output alive until the collective has completed. A handle dropped
  without waiting abandons the collective (its result is discarded; it still runs).
  """

  def __init__(self, request, kind, name, result, keep):
    self._request = request   # ctypes.c_void_p, None once the library freed it
    self._kind = kind
    self._name = name
    self._result = result     # returned by wait()
    self._keep = keep         # inputs and outputs the library reads or writes until completion
    self._error = None
    self._lock = threading.Lock()

  @property
  def name(self):
    """The tensor name the collective runs under."""
    return self._name

  def _complete(self, code):
    """Records the outcome of a finished request (the library has freed it)."""
    # Read rs_last_error() first, on this thread, before anything else can call the library.
    if code != SUCCESS:
      self._error = _capi.error(code)
    self._request = None
    self._keep = None
    _buffers.retry_deferred()

  def done(self):
    """True once the collective has completed (successfully or not): wait() will not block."""
    if not self._lock.acquire(blocking=False):
      return False  # another thread is waiting on it
    try:
      if self._request is not None:
        code = _capi.lib().rs_test(self._request)
        if code == IN_PROGRESS:
          return False
        self._complete(code)
      return True
    finally:
      self._lock.release()

  def wait(self, timeout=None):
    """Blocks until the collective completes and returns its result.

    Raises RingsyncError with the daemon's message when it failed (every later wait() raises
    it again). With `timeout` (seconds), raises TimeoutError when it has not completed by then;
    the handle stays valid: wait again later.
    """
    with self._lock:
      if self._request is not None:
        self._wait(timeout)
    if self._error is not None:
      raise self._error
    return self._result

  def _wait(self, timeout):
    lib = _capi.lib()
    deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
    while True:
      slice_ms = _WAIT_SLICE_MS
      if deadline is not None:
        slice_ms = max(0, min(slice_ms, int((deadline - time.monotonic()) * 1000)))
      code = lib.rs_wait_timeout(self._request, slice_ms)
      if code != IN_PROGRESS:
        self._complete(code)
        return
      if deadline is not None and time.monotonic() >= deadline:
        raise TimeoutError("%s '%s' has not completed after %g s; the handle stays valid: wait "
                           "again (the other ranks may not have submitted it yet)"
                           % (self._kind, self._name, timeout))

  def __del__(self):
    request = getattr(self, "_request", None)
    if request is None:
      return
    self._request = None
    try:
      _capi.lib().rs_request_free(request)
    except Exception:  # interpreter shutdown: the module may be half torn down
      pass

  def __repr__(self):
    state = "pending" if self._request is not None else (
        "failed" if self._error is not None else "done")
    return "<ringsync.Handle %s '%s' %s>" % (self._kind, self._name, state)
