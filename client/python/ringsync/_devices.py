"""GPU memory in collectives: the one place device buffers are routed.

A CUDA torch tensor (or a GPU array with __cuda_array_interface__) goes to the C library by its
device pointer, as host memory does. The library recognises the pointer through the process's
CUDA driver, registers its allocation with the daemon on first use (the daemon maps it with
CUDA IPC, and reduces and copies on the device), and, before submitting, waits for the work
queued on the stream set with rs_set_device_stream (docs/gpu-buffers.md). Here:

- route() checks the devices of one call (all on one device, no host memory mixed in, CUDA
  only) and takes the caller's stream: torch's current stream of the tensor's device, or the
  array interface's "stream";
- Devices.submit() sets that stream and submits under one lock: the library's stream is the
  connection's, not the call's, so two threads must not interleave the two steps;
- Devices.abandon() keeps the buffers of a device collective whose handle was dropped alive
  until it completes: the daemon writes them directly, and a caching allocator (torch's) would
  otherwise give their memory to new tensors meanwhile.
"""

import sys
import threading

from . import _capi
from .errors import RingsyncError

# The stream handle of the legacy default stream (CU_STREAM_LEGACY). torch reports its default
# stream as 0, which the library would take as "every stream of the context".
_CU_STREAM_LEGACY = 1


# Buffers of GPU collectives abandoned and still in flight when their connection closed.
_OUTLIVED = []


class DeviceCall:
  """How a collective on GPU memory is submitted: after the work queued on `stream` (0: all
  work of the buffers' CUDA context)."""

  __slots__ = ("device", "stream")

  def __init__(self, device, stream):
    self.device = device
    self.stream = stream


def _where(view):
  return "on the CPU (host memory)" if view.device is None else "on device '%s'" % view.device


def route(kind, x, send, recv):
  """None when the call's buffers are host memory; a DeviceCall when they are on a GPU.

  x: the caller's input; send, recv: the views handed to the library (a copy of x or x
  itself; a new result, the caller's out, or x). Raises ValueError when they are on
  different devices, RingsyncError "UNSUPPORTED" for a device other than a CUDA GPU.
  """
  if x.device is None and recv.device is None and send.device is None:
    return None
  if x.device != recv.device or x.device != send.device:
    mixed = x.device is None or recv.device is None
    raise ValueError(
        "%s: the input is %s but out is %s: the tensors of one call must all be on the same "
        "device%s; move one of them first (out.to(x.device), x.to(out.device))"
        % (kind, _where(x), _where(recv),
           " (host and GPU memory cannot be mixed)" if mixed else ""))
  check_supported(kind, x)
  return DeviceCall(x.device, _stream(x, recv))


def check_supported(kind, view):
  """RingsyncError "UNSUPPORTED" for memory on a device other than a CUDA GPU."""
  device = view.device
  if device is None or device == "cuda" or device.startswith("cuda:"):
    return
  raise RingsyncError(
      "UNSUPPORTED",
      "%s of a tensor on device '%s': ringsync takes host memory (numpy arrays, CPU tensors) "
      "and CUDA GPU memory (CUDA tensors, __cuda_array_interface__ arrays); move the tensor "
      "first (tensor.cpu() or tensor.cuda())" % (kind, device))


def _stream(x, recv):
  """The stream whose queued work the library waits for before submitting."""
  if x.framework == "torch":
    torch = sys.modules["torch"]
    return torch.cuda.current_stream(x.obj.device).cuda_stream or _CU_STREAM_LEGACY
  # __cuda_array_interface__: the producer's stream when input and output agree on one;
  # otherwise (none given, or two) every stream of the context.
  if x.stream is not None and x.stream == recv.stream:
    return x.stream
  return 0


class Devices:
  """A connection's GPU state: the library's current stream, and abandoned collectives."""

  def __init__(self):
    self._submit_lock = threading.Lock()
    self._stream = 0  # what the library holds: NULL (every stream) after rs_connect
    # Finalizers append here, maybe on a thread that holds the lock already.
    self._abandoned_lock = threading.RLock()
    self._abandoned = []  # (request, buffers) of dropped handles still pending
    self._closed = False

  def submit(self, ctx, call, submit):
    """Sets call.stream in the library, then runs submit() (the C *_async call)."""
    with self._submit_lock:
      if call.stream != self._stream:
        _capi.call(_capi.lib().rs_set_device_stream, ctx, call.stream)
        self._stream = call.stream
      submit()

  def abandon(self, request, buffers):
    """Takes over the pending request of a dropped handle (a finalizer: never calls C). False
    once the connection has closed: the caller frees the request."""
    with self._abandoned_lock:
      if self._closed:
        return False
      self._abandoned.append((request, buffers))
      return True

  def reap(self):
    """Lets go of the buffers of abandoned collectives that have completed (non-blocking)."""
    if not self._abandoned:
      return
    with self._abandoned_lock:
      pending, self._abandoned = self._abandoned, []
    lib = _capi.lib()
    kept = [entry for entry in pending if lib.rs_test(entry[0]) == _capi.IN_PROGRESS]
    if kept:
      with self._abandoned_lock:
        self._abandoned.extend(kept)

  def release_all(self):
    """After rs_disconnect(). The daemon may still be writing the buffers of collectives that
    were in flight (it finishes GPU work it started even for a client that left), and nothing
    says when it is done: their buffers stay referenced for the life of the process, so that
    the caching allocator never hands that memory to new tensors."""
    with self._abandoned_lock:
      pending, self._abandoned = self._abandoned, []
      self._closed = True
    lib = _capi.lib()
    for request, buffers in pending:
      lib.rs_request_free(request)
      _OUTLIVED.append(buffers)
