"""The process's connection to its ringsyncd: init(), shutdown() and who this rank is.

One connection per process, as in Horovod. The C context may be used from several threads;
init() and shutdown() are serialised here. A process forked after init() does not inherit a
usable connection (the library's receiver thread stays in the parent): it must call init().
"""

import atexit
import ctypes
import os
import threading

from . import _buffers, _capi, _names
from .errors import RingsyncError

_lock = threading.RLock()
_ctx = None          # ctypes.c_void_p of the live rs_context_t, or None
_pid = None          # the process that connected
_generation = 0      # counts connections: buffers and handles know which one they belong to
_ranks = {}          # rank, size, ... of the live connection (they never change)
_atexit_registered = False


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
  global _ctx, _pid, _generation, _atexit_registered
  with _lock:
    if _ctx is not None and _pid == os.getpid():
      return
    if _ctx is not None:
      # Inherited across fork(): unusable here and not ours to disconnect. The parent's
      # buffers stay mapped in this process; they are no longer this connection's.
      _ctx = None
      _buffers.forget_all()
    lib = _capi.lib()
    config = _config(socket, job_id, local_rank, local_size, connect_timeout)
    ctx = _capi.c_ctx_p()
    _capi.check(lib.rs_connect(ctypes.byref(config), ctypes.byref(ctx)))
    _ranks.clear()
    _ranks.update(rank=lib.rs_rank(ctx), size=lib.rs_size(ctx),
                  local_rank=lib.rs_local_rank(ctx), local_size=lib.rs_local_size(ctx),
                  node_rank=lib.rs_node_rank(ctx), num_nodes=lib.rs_num_nodes(ctx))
    _ctx, _pid = ctx, os.getpid()
    _generation += 1
    _names.reset()
    if not _atexit_registered:
      atexit.register(shutdown)
      _atexit_registered = True


def shutdown():
  """Disconnects from the daemon. Pending collectives fail with "CLOSED".

  Arrays and tensors from ringsync.empty() stay valid: their contents move to private
  memory of this process (collectives on them then copy, like on any other array). Safe to
  call twice, and called at exit.
  """
  global _ctx
  with _lock:
    if _ctx is None:
      return
    ctx, mine = _ctx, _pid == os.getpid()
    _ctx = None
    _ranks.clear()
    if not mine:
      return  # a forked child: the parent owns the connection
    saved = _buffers.detach_all()
    _capi.lib().rs_disconnect(ctx)
    _buffers.reattach(saved)


def is_initialized():
  """True between init() and shutdown() in this process."""
  return _ctx is not None and _pid == os.getpid()


def current():
  """(ctx, generation) of the live connection; RingsyncError "NOT_INITIALIZED" if none."""
  ctx, pid, generation = _ctx, _pid, _generation
  if ctx is None:
    raise RingsyncError("NOT_INITIALIZED",
                        "ringsync is not initialized; call ringsync.init() first")
  if pid != os.getpid():
    raise RingsyncError("NOT_INITIALIZED",
                        "ringsync was initialized in process %d, which forked this one; call "
                        "ringsync.init() in this process" % pid)
  return ctx, generation


def is_current(generation):
  return _ctx is not None and generation == _generation and _pid == os.getpid()


def _get(key):
  current()
  value = _ranks.get(key)
  if value is None:  # shut down meanwhile
    current()
  return value


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
