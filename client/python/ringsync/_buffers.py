"""The shared buffers of one connection, behind ringsync.empty() (_empty.py).

A buffer comes from rs_alloc() and goes back with rs_free() once the last array or tensor
viewing it is garbage-collected (weakref.finalize on the ctypes block they all keep alive).
The library refuses to free a buffer while a pending collective uses it (the daemon may still
write it, even when that collective's handle was dropped): such a buffer, and one whose
finalizer ran where calling the library was not safe, is freed later, at the next allocation,
collective or completion.

rs_disconnect() unmaps every buffer of the connection. So that arrays still alive after
shutdown() do not point at unmapped memory, shutdown() moves their contents to private
anonymous memory mapped at the same address (Registry.detach / reattach).
"""

import ctypes
import mmap
import os
import threading
import warnings
import weakref

from . import _capi


class Registry:
  """The shared buffers of one connection: the live ones, and those still to be freed."""

  def __init__(self):
    # Finalizers take it too, and may run on a thread that holds it already.
    self._lock = threading.RLock()
    self._live = {}      # address -> (weakref to the ctypes block, bytes)
    self._to_free = []   # addresses whose arrays are gone
    self._closed = False

  def add(self, address, block, nbytes):
    with self._lock:
      self._live[address] = (weakref.ref(block), nbytes)

  def released(self, connection, address):
    """The finalizer of a block: rs_free() it now if that is safe, else later."""
    if connection.pid != os.getpid():
      return  # a forked child: the memory stays mapped; the parent's connection owns it
    with self._lock:
      self._live.pop(address, None)
      if self._closed:
        return  # unmapped (or moved to private memory) at shutdown
      self._to_free.append(address)
    # Not while this thread has yet to read the message of a failed call (rs_free would
    # overwrite it); never blocking (a finalizer can run anywhere).
    if not _capi.in_call() and connection.try_acquire():
      try:
        self.free_pending(connection)
      finally:
        connection.release()

  def free_pending(self, connection):
    """rs_free() for buffers whose arrays are gone; those a pending collective still uses
    stay for later. The caller holds a use of `connection`."""
    if not self._to_free:
      return
    with self._lock:
      pending, self._to_free = self._to_free, []
    kept = [address for address in pending
            if _capi.lib().rs_free(connection.ctx, address) != _capi.SUCCESS]
    if kept:
      with self._lock:
        self._to_free.extend(kept)

  def detach(self):
    """Before rs_disconnect(): the live buffers, each with a second mapping of its memory
    (or, where that fails, a copy of its contents) to read after the disconnect."""
    with self._lock:
      self._closed = True
      live, self._live = self._live.copy(), {}
      self._to_free = []
    saved = []
    for address, (ref, nbytes) in live.items():
      block = ref()
      if block is None:
        continue
      length = _page_round(nbytes)
      alias = _libc().mremap(address, 0, length, _MREMAP_MAYMOVE)
      if alias in (None, _MAP_FAILED):
        saved.append((address, nbytes, None, ctypes.string_at(address, nbytes), block))
      else:
        saved.append((address, nbytes, alias, None, block))
    return saved

  @staticmethod
  def reattach(saved):
    """After rs_disconnect(): private memory at each saved buffer's address, holding what the
    buffer held when the connection closed."""
    libc = _libc() if saved else None
    failed = 0
    for address, nbytes, alias, contents, block in saved:
      length = _page_round(nbytes)
      got = libc.mmap(address, length, mmap.PROT_READ | mmap.PROT_WRITE,
                      mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_FIXED_NOREPLACE, -1, 0)
      if got == address:
        ctypes.memmove(address, alias if alias is not None else contents, nbytes)
        weakref.finalize(block, libc.munmap, address, length).atexit = False
      else:
        if got not in (None, _MAP_FAILED):
          libc.munmap(got, length)
        failed += 1
      if alias is not None:
        libc.munmap(alias, length)
    if failed:
      warnings.warn("ringsync.shutdown(): %d array(s) from ringsync.empty() could not keep their "
                    "memory (the address was taken meanwhile, errno %d); do not use them any more"
                    % (failed, ctypes.get_errno()), RuntimeWarning, stacklevel=4)


# ---- shutdown: keep live arrays valid after rs_disconnect() unmaps their memory --------------

_PAGE = mmap.PAGESIZE
_MAP_FIXED_NOREPLACE = 0x100000  # Linux >= 4.17; older kernels take it as a mere hint
_MREMAP_MAYMOVE = 1  # with old_size 0: a second mapping of the same shared pages
_MAP_FAILED = ctypes.c_void_p(-1).value
_libc_handle = None


def _page_round(nbytes):
  return (nbytes + _PAGE - 1) // _PAGE * _PAGE


def _libc():
  global _libc_handle
  if _libc_handle is None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.mremap.restype = ctypes.c_void_p
    libc.mremap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int]
    libc.munmap.restype = ctypes.c_int
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    _libc_handle = libc
  return _libc_handle
