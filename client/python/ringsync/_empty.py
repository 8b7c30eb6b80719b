"""ringsync.empty(): arrays and tensors in the daemon's shared memory (zero copy).

The connection (_context.py) owns the buffers' Registry (_buffers.py); this module asks it for
one. It sits above both, so neither imports the other back.
"""

import ctypes
import math
import weakref

from . import _capi, _context, _dtypes


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
  if framework not in ("numpy", "torch"):
    raise ValueError("framework must be 'numpy' or 'torch', not %r" % (framework,))
  shape = _shape_of(shape)
  name = _dtypes.canonical(dtype, framework)
  native = _dtypes.native(name, framework)
  count = math.prod(shape)
  nbytes = count * _dtypes.SIZES[name]
  if nbytes == 0:
    _context.current()
    return _plain_empty(shape, native, framework)
  address = ctypes.c_void_p()
  with _context.use() as connection:
    connection.buffers.free_pending(connection)
    _capi.call(_capi.lib().rs_alloc, connection.ctx, nbytes, ctypes.byref(address))
    block = (ctypes.c_ubyte * nbytes).from_address(address.value)
    connection.buffers.add(address.value, block, nbytes)
    finalizer = weakref.finalize(block, connection.buffers.released, connection, address.value)
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
