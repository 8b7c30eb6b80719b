"""State kept by the daemon for this rank (rs_keep_state / rs_fetch_state): it outlives this
process, so a trainer restarted on the same node picks up where the last one committed.

keep_state(name, data) copies `data` into a new shared buffer and hands that buffer to the
daemon (which keeps it after this process has freed it); fetch_state(name) returns a copy of
what is kept, or None.
"""

import ctypes

from . import _capi, _context


def keep_state(name, data):
  """Keeps `data` (bytes-like, non-empty) as this rank's state `name` on its node."""
  view = memoryview(data).cast("B")
  if view.nbytes == 0:
    raise ValueError("keep_state: nothing to keep (0 bytes)")
  with _context.use() as connection:
    lib = _capi.lib()
    buffer = ctypes.c_void_p()
    _capi.call(lib.rs_alloc, connection.ctx, view.nbytes, ctypes.byref(buffer))
    if isinstance(data, bytes):
      source = data  # ctypes passes a bytes object's own memory
    elif not view.readonly:
      source = (ctypes.c_char * view.nbytes).from_buffer(view)
    else:
      source = bytes(view)
    try:
      ctypes.memmove(buffer.value, source, view.nbytes)
      _capi.call(lib.rs_keep_state, connection.ctx, _encode(name), buffer, view.nbytes)
    finally:
      # The daemon holds what it keeps; this process's mapping goes.
      lib.rs_free(connection.ctx, buffer)


def fetch_state(name):
  """The state `name` kept for this rank on its node, as bytes; None when there is none."""
  with _context.use() as connection:
    lib = _capi.lib()
    buffer = ctypes.c_void_p()
    length = ctypes.c_size_t()
    _capi.call(lib.rs_fetch_state, connection.ctx, _encode(name), ctypes.byref(buffer),
               ctypes.byref(length))
    if not buffer.value:
      return None
    try:
      return ctypes.string_at(buffer.value, length.value)
    finally:
      lib.rs_free(connection.ctx, buffer)


def nodes_waiting():
  """How many nodes wait to join the job's next run (elastic jobs with room; else 0)."""
  with _context.use() as connection:
    count = ctypes.c_int()
    _capi.call(_capi.lib().rs_nodes_waiting, connection.ctx, ctypes.byref(count))
    return count.value


def _encode(name):
  if not isinstance(name, str) or not name:
    raise TypeError("a kept state's name must be a non-empty str")
  return name.encode("utf-8")
