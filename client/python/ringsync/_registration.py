"""register_device() and unregister_device(): the GPU allocation behind a tensor, shared with the
daemon ahead of its first collective, or forgotten before its memory is freed."""

from . import _capi, _context, _devices, _dtypes
from ._tensors import View


def _gpu_view(x, kind):
  view = View(x, kind)
  _devices.check_supported(kind, view)
  if view.count == 0:
    raise ValueError("%s: x has no elements, so there is no GPU memory behind it" % kind)
  return view


def register_device(x):
  """Registers the GPU allocation holding x (a CUDA tensor or a __cuda_array_interface__
  array) with the daemon now, instead of at its first collective: the round trip is paid up
  front, and a daemon that cannot take it says so at once.

  Collectives register what they need by themselves, so this is optional. Registering an
  allocation twice does nothing. Raises RingsyncError "INVALID_ARGUMENT" with the library's
  message for host memory, memory CUDA IPC cannot share (a memory pool, PyTorch's expandable
  segments) and a daemon that cannot use GPU memory.
  """
  view = _gpu_view(x, "register_device")
  # A contiguous x must lie inside one allocation; for a strided one, its first element.
  nbytes = _dtypes.SIZES[view.dtype_name] * (view.count if view.contiguous else 1)
  with _context.use() as connection:
    _capi.call(_capi.lib().rs_register_device, connection.ctx, view.pointer, nbytes)


def unregister_device(x):
  """Forgets the registration of the GPU allocation holding x and lets the daemon unmap it
  (once no collective uses it).

  While the daemon maps an allocation, CUDA keeps its memory even after it is freed: call this
  before freeing memory collectives used (for torch, before torch.cuda.empty_cache() returns
  blocks to the driver), or the memory stays allocated until shutdown() (or until a collective
  finds new memory at that address). A later collective on the allocation registers it again. Raises RingsyncError "INVALID_ARGUMENT" when no registered
  allocation holds x or a pending collective uses it.
  """
  view = _gpu_view(x, "unregister_device")
  with _context.use() as connection:
    _capi.call(_capi.lib().rs_unregister_device, connection.ctx, view.pointer)
