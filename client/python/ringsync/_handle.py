"""Handle: an asynchronous collective, waited on with wait() or polled with done()."""

import threading
import time

from . import _capi
from .errors import IN_PROGRESS, RingsyncError

# A wait without a timeout still returns to Python this often, so that Ctrl-C (a signal
# handler raising KeyboardInterrupt) is not held off by a collective that never completes.
_WAIT_SLICE_MS = 200


class Handle:
  """A collective started by one of the *_async functions.

  wait() returns its result (the output array or tensor; None for a barrier) or raises the
  RingsyncError it failed with; done() says whether wait() would return at once. A handle
  keeps its input and output alive until the collective has completed.

  Dropping a handle before the collective has completed abandons it: it still runs, and the
  daemon may go on reading its input and writing its output until it has completed on every
  rank. An output from ringsync.empty() (the daemon can run the whole ring in it) may then
  change at any later moment; a plain array's output is no longer written once the handle is
  gone, and holds undefined contents. A later collective completing does not prove that the
  abandoned one has. So drop handles only to fire and forget: do not read, write or pass to
  another collective the buffers of a dropped handle; wait() when you need them again. (Memory
  stays safe either way: the library keeps a shared buffer allocated while a collective still
  uses it, even after its last array is gone, and the tensors of a dropped collective on GPU
  memory, which the daemon writes directly, stay alive until it has completed.)

  GPU memory: when wait() returns, the daemon's device work on the buffers has finished, so any
  kernel queued afterwards sees the result. Until then, do not write the input or the output,
  nor read the output, on any stream.
  """

  def __init__(self, request, kind, name, result, keep, connection=None, device=False):
    self._request = request   # ctypes.c_void_p, None once the library freed it
    self._kind = kind
    self._name = name
    self._result = result     # returned by wait()
    self._keep = keep         # inputs and outputs the library reads or writes until completion
    self._connection = connection  # frees buffers left for later once this completes
    self._device = device     # GPU memory: the daemon writes `keep` until completion
    self._error = None
    self._lock = threading.Lock()

  @property
  def name(self):
    """The tensor name the collective runs under."""
    return self._name

  def _call(self, function, *args):
    """function(request, *args) (rs_test, rs_wait_timeout): False while in progress; True
    once the request completed (the library freed it), its failure recorded."""
    try:
      if _capi.call(function, self._request, *args) == IN_PROGRESS:
        return False
    except RingsyncError as error:
      self._error = error
    self._request = None
    self._keep = None
    connection, self._connection = self._connection, None
    # A buffer freed while this collective used it can go now (never blocking: a use of the
    # connection must not wait for shutdown(), nor the other way round).
    if connection is not None and connection.try_acquire():
      try:
        connection.buffers.free_pending(connection)
      finally:
        connection.release()
    return True

  def done(self):
    """True once the collective has completed (successfully or not): wait() will not block."""
    if not self._lock.acquire(blocking=False):
      return False  # another thread is waiting on it
    try:
      return self._request is None or self._call(_capi.lib().rs_test)
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
      if self._call(lib.rs_wait_timeout, slice_ms):
        return
      if deadline is not None and time.monotonic() >= deadline:
        raise TimeoutError("%s '%s' has not completed after %g s; the handle stays valid: wait "
                           "again (the other ranks may not have submitted it yet)"
                           % (self._kind, self._name, timeout))

  def __del__(self):
    # rs_request_free() takes no context (requests outlive it), leaves rs_last_error() alone
    # and stops the delivery of a bounced result into our memory; shared buffers stay allocated in the library while the
    # collective runs (see the class doc), so the arrays need not outlive the handle.
    request = getattr(self, "_request", None)
    if request is None:
      return
    self._request = None
    connection = getattr(self, "_connection", None)
    # The daemon reads and writes GPU buffers in place until the collective completes: the
    # connection keeps them (and the request) until then.
    if (getattr(self, "_device", False) and connection is not None
        and connection.devices.abandon(request, self._keep)):
      return
    try:
      _capi.lib().rs_request_free(request)
    except Exception:  # interpreter shutdown: the module may be half torn down
      pass

  def __repr__(self):
    state = "pending" if self._request is not None else (
        "failed" if self._error is not None else "done")
    return "<ringsync.Handle %s '%s' %s>" % (self._kind, self._name, state)
