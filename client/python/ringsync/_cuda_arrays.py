"""GPU arrays of other libraries (CuPy, Numba, ...), read through __cuda_array_interface__.

The interface (version 0 to 3) describes device memory: a pointer, a shape, a typestr, strides
and, from version 3, the stream the producer queued its work on. ringsync reads that memory as
it reads a CUDA torch tensor's, but it cannot allocate memory of a library it does not know:
results need an `out` (or work in place), and inputs must be contiguous.
"""

import sys

from . import _dtypes

# typestr (kind + bytes, byte order apart) -> canonical dtype name.
_TYPESTRS = {"f2": "float16", "f4": "float32", "f8": "float64", "i4": "int32", "i8": "int64",
             "u1": "uint8"}
_NATIVE_ORDER = "<" if sys.byteorder == "little" else ">"


def has_interface(x):
  """True when x describes GPU memory with __cuda_array_interface__."""
  try:
    return isinstance(getattr(x, "__cuda_array_interface__", None), dict)
  except Exception:  # a property that refuses (e.g. memory not on a GPU)
    return False


def dtype_name(typestr):
  """The canonical dtype name of a native-order typestr ('<f4'), else None."""
  if not isinstance(typestr, str) or len(typestr) < 3:
    return None
  order, code = typestr[0], typestr[1:]
  if order not in ("|", "=", _NATIVE_ORDER) or (order == "|" and code != "u1"):
    return None
  return _TYPESTRS.get(code)


class Interface:
  """One object's __cuda_array_interface__, checked."""

  __slots__ = ("shape", "count", "dtype_name", "pointer", "writeable", "contiguous", "stream")

  def __init__(self, obj):
    cai = obj.__cuda_array_interface__
    try:
      shape = tuple(int(d) for d in cai["shape"])
      typestr = cai["typestr"]
      pointer, readonly = cai["data"]
    except (KeyError, TypeError, ValueError) as error:
      raise TypeError("%s has a malformed __cuda_array_interface__ (%s: %s)"
                      % (type(obj).__name__, type(error).__name__, error)) from None
    if cai.get("mask") is not None:
      raise TypeError("%s is a masked GPU array; ringsync takes arrays without a mask"
                      % type(obj).__name__)
    name = dtype_name(typestr)
    if name is None:
      raise TypeError("ringsync does not support the GPU array dtype %r (typestr of %s); "
                      "supported: %s in native byte order"
                      % (typestr, type(obj).__name__, ", ".join(sorted(_TYPESTRS))))
    count = 1
    for d in shape:
      count *= d
    self.shape = shape
    self.count = count
    self.dtype_name = name
    self.pointer = int(pointer or 0)
    self.writeable = not readonly
    self.contiguous = _is_c_contiguous(shape, cai.get("strides"), _dtypes.SIZES[name])
    # Version 3: the stream to wait for before reading (None: nothing to wait for; 1 and 2
    # are the legacy and per-thread default streams). Older versions say nothing.
    stream = cai.get("stream") if int(cai.get("version", 0)) >= 3 else None
    self.stream = int(stream) if stream else None


def _is_c_contiguous(shape, strides, itemsize):
  if strides is None:
    return True
  expected = itemsize
  for d, s in zip(reversed(shape), reversed(tuple(strides))):
    if d > 1 and s != expected:
      return False
    expected *= d
  return True


def cannot_allocate(kind, what):
  """The error for an out-of-place call that would need ringsync to allocate GPU memory."""
  return ValueError(
      "%s of a GPU array with __cuda_array_interface__ needs %s, which ringsync cannot "
      "allocate for a library it does not know; pass a contiguous array and out= (an array of "
      "the result's size, or out=x to work in place), or use a torch tensor" % (kind, what))
