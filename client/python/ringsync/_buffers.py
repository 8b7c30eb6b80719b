"""ringsync.empty(): arrays and tensors in the daemon's shared memory (zero copy).

A buffer comes from rs_alloc() and goes back with rs_free() once the last array or tensor
viewing it is garbage-collected (weakref.finalize on the ctypes block they all keep alive).
A buffer still used by a pending collective cannot be freed yet: it is freed later, at the
next allocation or collective completion.

rs_disconnect() unmaps every buffer of the connection. So that arrays still alive after
shutdown() do not point at unmapped memory, shutdown() moves their contents to private
anonymous memory mapped at the same address (detach_all / reattach).
"""

import ctypes
import math
import mmap
import threading
import warnings
import weakref

from . import _capi, _dtypes

_lock = threading.RLock()
_live = {}       # address -> (weakref to the ctypes block, bytes): buffers of the live connection
_deferred = []   # addresses whose rs_free() found a pending collective, with their generation


def _release(address, generation):
  """The finalizer of a block: rs_free() it, or try again later while a collective uses it."""
  from . import _context
  with _lock:
    _live.pop(address, None)
    if not _context.is_current(generation):
      return  # unmapped (or moved to private memory) at shutdown
    ctx, _ = _context.current()
    code = _capi.lib().rs_free(ctx, address)
    if code != 0:
      _deferred.append((address, generation))


def retry_deferred():
  """Frees buffers whose last array died while a collective still used them."""
  if not _deferred:
    return
  from . import _context
  with _lock:
    pending = list(_deferred)
    del _deferred[:]
    for address, generation in pending:
      if not _context.is_current(generation):
        continue
      ctx, _ = _context.current()
      if _capi.lib().rs_free(ctx, address) != 0:
        _deferred.append((address, generation))


def _shape_of(shape):
  if isinstance(shape, int):
    shape = (shape,)
  try:
    shape = tuple(int(d) for d in shape)
  except TypeError:
    raise TypeError("shape must be an int or a sequence of ints, not %r" % (shape,)) from None
  if any(d < 0 for d in shape):
    raise ValueError("shape %r has a negative dimension" % (shape,))
  return shape


def empty(shape, dtype, framework="numpy"):
  """A new, uninitialised numpy array (framework="numpy") or torch tensor ("torch") of `shape`
  and `dtype`, in memory shared with the daemon: collectives whose input and output lie in
  such buffers move no bytes between this process and the daemon (zero copy).

  The memory returns to the daemon when the array and every view of it are garbage-collected.
  Arrays with no elements are ordinary arrays (there is nothing to share).
  """
  from . import _context
  if framework not in ("numpy", "torch"):
    raise ValueError("framework must be 'numpy' or 'torch', not %r" % (framework,))
  shape = _shape_of(shape)
  name = _dtypes.canonical(dtype, framework)
  native = _dtypes.native(name, framework)
  count = math.prod(shape)
  nbytes = count * _dtypes.SIZES[name]
  ctx, generation = _context.current()
  if nbytes == 0:
    return _plain_empty(shape, native, framework)
  retry_deferred()
  address = ctypes.c_void_p()
  _capi.check(_capi.lib().rs_alloc(ctx, nbytes, ctypes.byref(address)))
  block = (ctypes.c_ubyte * nbytes).from_address(address.value)
  with _lock:
    _live[address.value] = (weakref.ref(block), nbytes)
  finalizer = weakref.finalize(block, _release, address.value, generation)
  finalizer.atexit = False  # shutdown() at exit takes care of live buffers
  if framework == "numpy":
    import numpy as np
    return np.frombuffer(block, dtype=native, count=count).reshape(shape)
  import torch
  return torch.frombuffer(block, dtype=native, count=count).reshape(shape)


def _plain_empty(shape, native, framework):
  if framework == "numpy":
    import numpy as np
    return np.empty(shape, dtype=native)
  import torch
  return torch.empty(shape, dtype=native)


def is_shared(address, nbytes=1):
  """True when [address, address + nbytes) lies inside a live buffer from empty()."""
  with _lock:
    for base, (ref, size) in _live.items():
      if base <= address and address + nbytes <= base + size and ref() is not None:
        return True
  return False


# ---- shutdown: keep live arrays valid after rs_disconnect() unmaps their memory --------------

_PAGE = mmap.PAGESIZE
_MAP_FIXED_NOREPLACE = 0x100000  # Linux >= 4.17; older kernels take it as a mere hint
_libc = None


def _mmap_function():
  global _libc
  if _libc is None:
    _libc = ctypes.CDLL(None, use_errno=True)
    _libc.mmap.restype = ctypes.c_void_p
    _libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                           ctypes.c_int, ctypes.c_long]
    _libc.munmap.restype = ctypes.c_int
    _libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
  return _libc


def detach_all():
  """Before rs_disconnect(): the contents of every live buffer, to put back afterwards."""
  with _lock:
    saved = []
    for address, (ref, nbytes) in _live.items():
      block = ref()
      if block is not None:
        saved.append((address, nbytes, ctypes.string_at(address, nbytes), block))
    _live.clear()
    del _deferred[:]
    return saved


def forget_all():
  """In a forked child: the parent's buffers stay mapped here but belong to its connection."""
  with _lock:
    _live.clear()
    del _deferred[:]


def reattach(saved):
  """After rs_disconnect(): private memory at each saved buffer's address, with its contents."""
  if not saved:
    return
  libc = _mmap_function()
  failed = 0
  for address, nbytes, contents, block in saved:
    length = (nbytes + _PAGE - 1) // _PAGE * _PAGE
    got = libc.mmap(address, length, mmap.PROT_READ | mmap.PROT_WRITE,
                    mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_FIXED_NOREPLACE, -1, 0)
    if got != address:
      if got not in (None, ctypes.c_void_p(-1).value):
        libc.munmap(got, length)
      failed += 1
      continue
    ctypes.memmove(address, contents, nbytes)
    weakref.finalize(block, libc.munmap, address, length).atexit = False
  if failed:
    warnings.warn("ringsync.shutdown(): %d array(s) from ringsync.empty() could not keep their "
                  "memory (the address was taken meanwhile, errno %d); do not use them any more"
                  % (failed, ctypes.get_errno()), RuntimeWarning, stacklevel=3)
