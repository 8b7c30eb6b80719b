"""What the collectives need to know about an array: a numpy array, a torch tensor (on the CPU
or a GPU), or a GPU array of another library (__cuda_array_interface__).

Everything framework-specific lives here: the collectives see a `View` (pointer, element
count, dtype code, contiguity, device) and ask this module for new results. Neither numpy nor
torch is imported: an object can only be a torch tensor if torch is already imported. What
happens to memory that is not on the host is decided in one place, _devices.route().
"""

import sys

from . import _cuda_arrays, _dtypes


def framework_of(x):
  """'numpy', 'torch' or 'cuda_array'; TypeError for anything else."""
  np = sys.modules.get("numpy")
  if np is not None and isinstance(x, np.ndarray):
    return "numpy"
  torch = sys.modules.get("torch")
  if torch is not None and isinstance(x, torch.Tensor):
    return "torch"
  if _cuda_arrays.has_interface(x):
    return "cuda_array"
  raise TypeError("ringsync collectives take a numpy.ndarray or a torch.Tensor, not %s (or a "
                  "GPU array with __cuda_array_interface__: CuPy, Numba, ...)" % type(x).__name__)


class View:
  """An array or tensor as the C library sees it.

  `device` is None for host memory, else where the memory is: "cuda:0" (a torch tensor's
  device), "cuda" (a __cuda_array_interface__ array), or another torch device ("meta", ...),
  which _devices.route() refuses.
  """

  __slots__ = ("obj", "framework", "dtype_name", "code", "shape", "count", "contiguous",
               "pointer", "writeable", "device", "stream")

  def __init__(self, obj, kind):
    framework = framework_of(obj)
    self.obj = obj
    self.framework = framework
    self.stream = None  # __cuda_array_interface__ only: the producer's stream
    if framework == "cuda_array":
      cai = _cuda_arrays.Interface(obj)
      name = cai.dtype_name
      self.shape, self.count, self.contiguous = cai.shape, cai.count, cai.contiguous
      self.pointer, self.writeable, self.device = cai.pointer, cai.writeable, "cuda"
      self.stream = cai.stream
    elif framework == "numpy":
      name = _dtypes.numpy_name(obj.dtype)
      self.shape, self.count = tuple(obj.shape), int(obj.size)
      self.contiguous = bool(obj.flags.c_contiguous)
      self.pointer = obj.__array_interface__["data"][0]
      self.writeable, self.device = bool(obj.flags.writeable), None
    else:
      name = _dtypes.torch_name(obj.dtype)
      self.shape, self.count = tuple(obj.shape), int(obj.numel())
      self.contiguous = bool(obj.is_contiguous())
      self.pointer, self.writeable = obj.data_ptr(), True
      self.device = None if obj.device.type == "cpu" else str(obj.device)
    if name is None:
      raise _dtypes.unsupported(obj.dtype, framework)
    self.dtype_name = name
    self.code = _dtypes.CODES[name]

  def contiguous_copy(self, kind):
    """This array if contiguous, else a contiguous copy on the same device (the input of an
    out-of-place call)."""
    if self.contiguous:
      return self
    if self.framework == "numpy":
      copy = self.obj.copy(order="C")
    elif self.framework == "torch":
      copy = self.obj.contiguous()  # on the tensor's own device
    else:
      raise _cuda_arrays.cannot_allocate(kind, "a contiguous copy of its non-contiguous input")
    return View(copy, "copy")

  def new(self, shape, kind):
    """A new, uninitialised contiguous array or tensor of this dtype on this device (a
    result)."""
    if self.framework == "numpy":
      np = sys.modules["numpy"]
      return View(np.empty(shape, dtype=self.obj.dtype), "result")
    if self.framework == "torch":
      torch = sys.modules["torch"]
      return View(torch.empty(shape, dtype=self.obj.dtype, device=self.obj.device), "result")
    raise _cuda_arrays.cannot_allocate(kind, "a new array for its result")


def as_out(out, like, count, kind):
  """Checks a caller's `out` for a result of `count` elements like `like`; returns its View."""
  view = View(out, kind)
  if view.framework != like.framework:
    raise TypeError("%s: out is a %s but the input is a %s; use the same kind for both"
                    % (kind, view.framework, like.framework))
  if view.dtype_name != like.dtype_name:
    raise TypeError("%s: out has dtype %s but the input has dtype %s"
                    % (kind, view.dtype_name, like.dtype_name))
  if view.count != count:
    raise ValueError("%s: out has %d elements but the result has %d" % (kind, view.count, count))
  if not view.contiguous:
    raise ValueError("%s: out must be contiguous: the library writes the result into its memory "
                     "in one piece; pass out=None for a new result, or a contiguous out "
                     "(numpy.ascontiguousarray, tensor.contiguous())" % kind)
  if not view.writeable:
    raise ValueError("%s: out is read-only" % kind)
  return view
