"""The process's connection to its ringsyncd: init(), shutdown() and who this rank is.

One connection per process, as in Horovod. The C context may be used from several threads;
init() and shutdown() are serialised here. A process forked after init() does not inherit a
usable connection (the library's receiver thread stays in the parent): it must call init().

rs_disconnect() frees the C context, so no other call may be running on it then. Every C
call that takes the context holds a "use" of its Connection for the length of the call
(`with _context.use() as connection:`); shutdown() refuses new uses, waits for the running
ones to return and only then disconnects. Waiting on a request needs no use: requests
outlive their context (they complete with RS_CLOSED), so a blocked wait never holds up
shutdown().
"""

import atexit
import ctypes
import os
import threading
import time
import warnings

from . import _buffers, _capi, _devices, _names
from .errors import RingsyncError

# How long shutdown() waits for C calls running on other threads (submissions and
# allocations: one round trip to the daemon each) before it leaves the disconnect to the
# last of them. Only a daemon that stopped answering takes that long.
DRAIN_TIMEOUT_S = 10.0

_lock = threading.RLock()  # serialises init() and shutdown()
_current = None            # the live Connection, or None
_atexit_registered = False


def _not_initialized(message):
  return RingsyncError("NOT_INITIALIZED", message)


class Connection:
  """One rs_context_t, the uses of it in progress, and the shared buffers allocated on it."""

  def __init__(self, ctx, ranks):
    self.ctx = ctx                   # ctypes.c_void_p; never used after disconnect
    self.pid = os.getpid()
    self.ranks = ranks               # rank, size, ... (they never change)
    self.buffers = _buffers.Registry()
    self.devices = _devices.Devices()  # GPU collectives: the library's stream, dropped handles
    self._cond = threading.Condition(threading.Lock())
    self._uses = 0
    self._closing = False            # shutdown() began: no new uses
    self._orphaned = False           # shutdown() gave up waiting: the last use disconnects
    self._disconnected = False

  def acquire(self):
    """Starts a use; RingsyncError "NOT_INITIALIZED" once shutdown() has begun."""
    with self._cond:
      if self._closing:
        raise _not_initialized("ringsync is shut down (shutdown() was called, maybe on "
                               "another thread); call ringsync.init() to connect again")
      self._uses += 1
    return self.ctx

  def try_acquire(self):
    """A use if one can be had at once (finalizers must never block), else False."""
    if self.pid != os.getpid() or not self._cond.acquire(blocking=False):
      return False
    try:
      if self._closing:
        return False
      self._uses += 1
      return True
    finally:
      self._cond.release()

  def release(self):
    with self._cond:
      self._uses -= 1
      if self._uses:
        return
      self._cond.notify_all()
      last = self._orphaned and not self._disconnected
      self._disconnected = self._disconnected or last
    if last:
      self._disconnect()

  def close(self, timeout):
    """Refuses new uses, waits up to `timeout` seconds for running ones, then disconnects.
    False when uses were still running: the last of them disconnects when it returns."""
    deadline = time.monotonic() + timeout
    with self._cond:
      self._closing = True
      while self._uses:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
          self._orphaned = True
          return False
        self._cond.wait(remaining)
      self._disconnected = True
    self._disconnect()
    return True

  def _disconnect(self):
    # No C call runs on ctx any more. rs_disconnect() fails what is still pending (RS_CLOSED)
    # and unmaps the shared buffers: their contents move to private memory, read after the
    # disconnect so that every collective reported successful has written its result.
    saved = self.buffers.detach()
    _capi.lib().rs_disconnect(self.ctx)
    self.ctx = None
    self.buffers.reattach(saved)
    self.devices.release_all()


class use:
  """`with use() as connection:` holds a use of the live connection (see the module's doc)."""

  __slots__ = ("connection",)

  def __enter__(self):
    self.connection = current()
    self.connection.acquire()
    return self.connection

  def __exit__(self, *exc):
    self.connection.release()


def _config(socket, job_id, local_rank, local_size, connect_timeout):
  lib = _capi.lib()
  config = _capi.Config()
  lib.rs_config_init(ctypes.byref(config))
  if socket is not None:
    config.socket_path = os.fsencode(socket)
  if job_id is not None:
    config.job_id = str(job_id).encode("utf-8")
  if local_rank is not None:
    if int(local_rank) < 0:
      raise ValueError("local_rank must be >= 0, not %r" % (local_rank,))
    config.local_rank = int(local_rank)
  if local_size is not None:
    if int(local_size) < 1:
      raise ValueError("local_size must be >= 1, not %r" % (local_size,))
    config.local_size = int(local_size)
  if connect_timeout is not None:
    if connect_timeout <= 0:
      raise ValueError("connect_timeout must be > 0 seconds, not %r" % (connect_timeout,))
    config.connect_timeout_ms = max(1, int(connect_timeout * 1000))
  return config


def init(socket=None, job_id=None, local_rank=None, local_size=None, connect_timeout=None):
  """Connects this process to the ringsyncd of its node and joins the job.

  Every argument left None comes from the environment the launcher sets: RINGSYNC_SOCKET
  (else the daemon's default socket), RINGSYNC_JOB_ID (else "default"), RINGSYNC_LOCAL_RANK
  and RINGSYNC_LOCAL_SIZE (else rank 0 of 1). `connect_timeout` (seconds, default 10) bounds
  the wait for the daemon's socket. Idempotent: once connected, further calls return at once.
  Raises RingsyncError with the library's message when the daemon cannot be reached or refuses
  the rank (e.g. "CLOSED", "INVALID_ARGUMENT").
  """
  global _current, _atexit_registered
  with _lock:
    if _current is not None and _current.pid == os.getpid():
      return
    # Inherited across fork() (or nothing): the parent's connection is unusable here and not
    # ours to disconnect. Its buffers stay mapped in this process; they are no longer tracked.
    _current = None
    lib = _capi.lib()
    config = _config(socket, job_id, local_rank, local_size, connect_timeout)
    ctx = _capi.c_ctx_p()
    _capi.call(lib.rs_connect, ctypes.byref(config), ctypes.byref(ctx))
    ranks = dict(rank=lib.rs_rank(ctx), size=lib.rs_size(ctx),
                 local_rank=lib.rs_local_rank(ctx), local_size=lib.rs_local_size(ctx),
                 node_rank=lib.rs_node_rank(ctx), num_nodes=lib.rs_num_nodes(ctx))
    _names.reset()
    _current = Connection(ctx, ranks)
    if not _atexit_registered:
      atexit.register(shutdown)
      _atexit_registered = True


def shutdown():
  """Disconnects from the daemon. Pending collectives fail with "CLOSED".

  Collectives and ringsync.empty() called meanwhile on other threads raise RingsyncError
  "NOT_INITIALIZED"; calls already inside the library finish first (shutdown() waits up to
  DRAIN_TIMEOUT_S seconds for them, then leaves the disconnect to the last of them).
  Arrays and tensors from ringsync.empty() stay valid: their contents move to private
  memory of this process (collectives on them then copy, like on any other array); do not
  touch them on other threads while shutdown() runs. Safe to call twice, and called at exit.
  """
  global _current
  with _lock:
    connection, _current = _current, None
    if connection is None or connection.pid != os.getpid():
      return  # not connected, or a forked child: the parent owns the connection
    if not connection.close(DRAIN_TIMEOUT_S):
      warnings.warn("ringsync.shutdown(): calls into the library on other threads did not "
                    "return within %g s (is the daemon answering?); the connection closes "
                    "when the last of them returns" % DRAIN_TIMEOUT_S, RuntimeWarning,
                    stacklevel=2)


def is_initialized():
  """True between init() and shutdown() in this process."""
  connection = _current
  return connection is not None and connection.pid == os.getpid()


def current():
  """The live Connection; RingsyncError "NOT_INITIALIZED" if none."""
  connection = _current
  if connection is None:
    raise _not_initialized("ringsync is not initialized; call ringsync.init() first")
  if connection.pid != os.getpid():
    raise _not_initialized("ringsync was initialized in process %d, which forked this one; "
                           "call ringsync.init() in this process" % connection.pid)
  return connection


def _get(key):
  return current().ranks[key]


def rank():
  """This process's global rank: node_rank() * local_size() + local_rank()."""
  return _get("rank")


def size():
  """The number of ranks in the job: num_nodes() * local_size()."""
  return _get("size")


def local_rank():
  """This process's rank among the ranks on its node (its daemon)."""
  return _get("local_rank")


def local_size():
  """The number of ranks on each node."""
  return _get("local_size")


def node_rank():
  """This node's place in the job (0 on a single-node daemon)."""
  return _get("node_rank")


def num_nodes():
  """The number of nodes (daemons) in the job."""
  return _get("num_nodes")
