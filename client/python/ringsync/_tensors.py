"""What the collectives need to know about a numpy array or a torch tensor.

Everything framework-specific lives here: the collectives see a `View` (pointer, element
count, dtype code, contiguity) and ask this module for new results. Neither framework is
imported: an object can only be a torch tensor if torch is already imported.
"""

import sys

from . import _dtypes
from .errors import RingsyncError


def framework_of(x):
  """'numpy' or 'torch'; TypeError for anything else."""
  np = sys.modules.get("numpy")
  if np is not None and isinstance(x, np.ndarray):
    return "numpy"
  torch = sys.modules.get("torch")
  if torch is not None and isinstance(x, torch.Tensor):
    return "torch"
  raise TypeError("ringsync collectives take a numpy.ndarray or a torch.Tensor, not %s"
                  % type(x).__name__)


def device_of(x, framework):
  """'cpu' for host memory, else the device type ('cuda', ...)."""
  return "cpu" if framework == "numpy" else x.device.type


def device_collective(x, kind, device):
  """The one place device (GPU) buffers go. This build's daemon reduces host memory only."""
  raise RingsyncError(
      "UNSUPPORTED",
      "%s of a tensor on device '%s': GPU buffers are not supported by this build of ringsync "
      "and its daemon; move the tensor to the CPU (tensor.cpu()) first" % (kind, device))


class View:
  """A contiguous-or-not array or tensor as the C library sees it."""

  __slots__ = ("obj", "framework", "dtype_name", "code")

  def __init__(self, obj, kind):
    framework = framework_of(obj)
    device = device_of(obj, framework)
    if device != "cpu":
      device_collective(obj, kind, device)
    name = (_dtypes.numpy_name(obj.dtype) if framework == "numpy"
            else _dtypes.torch_name(obj.dtype))
    if name is None:
      raise _dtypes.unsupported(obj.dtype, framework)
    self.obj = obj
    self.framework = framework
    self.dtype_name = name
    self.code = _dtypes.CODES[name]

  @property
  def shape(self):
    return tuple(self.obj.shape)

  @property
  def count(self):
    return int(self.obj.size) if self.framework == "numpy" else int(self.obj.numel())

  @property
  def contiguous(self):
    if self.framework == "numpy":
      return bool(self.obj.flags.c_contiguous)
    return bool(self.obj.is_contiguous())

  @property
  def pointer(self):
    if self.framework == "numpy":
      return self.obj.__array_interface__["data"][0]
    return self.obj.data_ptr()

  @property
  def writeable(self):
    return self.framework != "numpy" or bool(self.obj.flags.writeable)

  def contiguous_copy(self):
    """This array if contiguous, else a contiguous copy (the input of an out-of-place call)."""
    if self.contiguous:
      return self
    if self.framework == "numpy":
      copy = self.obj.copy(order="C")
    else:
      copy = self.obj.contiguous()
    return View(copy, "copy")

  def new(self, shape):
    """A new, uninitialised contiguous array or tensor of this dtype (a result)."""
    if self.framework == "numpy":
      np = sys.modules["numpy"]
      return View(np.empty(shape, dtype=self.obj.dtype), "result")
    torch = sys.modules["torch"]
    return View(torch.empty(shape, dtype=self.obj.dtype), "result")


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
