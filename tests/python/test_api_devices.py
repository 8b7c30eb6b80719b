"""GPU memory in the core API, on any machine: how device buffers are routed and checked.

- Routing: torch tensors on a device other than the CPU go the device route; 'meta' tensors
  (no memory, no GPU needed) stand in for GPU tensors to check that a call's tensors must all
  be on one device, that out-of-place results are made on the input's device, and that devices
  other than CUDA are refused.
- GPU arrays of other libraries (__cuda_array_interface__): wrappers of host memory. Without a
  CUDA driver in the process the library treats their memory as host memory, so collectives on
  them run for real and check what Python hands the library: pointers, counts, dtypes, the
  producer's stream (rs_set_device_stream), and that a dropped handle keeps its buffers.
- A stand-in CUDA driver (fake_cuda/fake_libcuda.c) makes host memory look like GPU memory to
  the library: the collective then goes to the daemon as GPU memory, and the daemon's refusal
  (it cannot use a GPU here) comes back as RingsyncError with its message.

Real CUDA tensors are in test_torch_cuda.py (skipped without a GPU).
"""

import ctypes
import importlib.util
import os
import unittest

import harness

HAVE_TORCH = importlib.util.find_spec("torch") is not None


class GpuArray:
  """A __cuda_array_interface__ over a numpy array's (host) memory."""

  def __init__(self, array, stream=None, version=3, readonly=False, typestr=None, mask=None):
    self.array = array  # keeps the memory alive; the results are read here
    interface = {
        "shape": array.shape,
        "typestr": typestr or array.dtype.str,
        "data": (array.__array_interface__["data"][0], readonly),
        "strides": None if array.flags.c_contiguous else array.strides,
        "version": version,
    }
    if version >= 3:
      interface["stream"] = stream
    if mask is not None:
      interface["mask"] = mask
    self.__cuda_array_interface__ = interface


def _raises(status, fragments, call, *args, **kwargs):
  """Runs call; fails unless it raises RingsyncError `status` whose message holds every
  fragment. Returns the error."""
  import ringsync as rs
  try:
    call(*args, **kwargs)
  except rs.RingsyncError as e:
    assert e.status == status, "want %s, got %r" % (status, e)
    for fragment in fragments:
      assert fragment in e.message, "%r not in %r" % (fragment, e.message)
    return e
  raise AssertionError("no RingsyncError %s" % status)


def _raises_type(exception, fragments, call, *args, **kwargs):
  try:
    call(*args, **kwargs)
  except exception as e:
    for fragment in fragments:
      assert fragment in str(e), "%r not in %r" % (fragment, str(e))
    return e
  raise AssertionError("no %s" % exception.__name__)


def _spy_streams():
  """Records every stream the package sets in the library (and still sets it)."""
  from ringsync import _capi
  lib = _capi.lib()
  real = lib.rs_set_device_stream
  seen = []

  def spy(ctx, stream):
    seen.append(stream)
    return real(ctx, stream)
  lib.rs_set_device_stream = spy
  return seen


def rank_gpu_arrays():
  """Two ranks; GPU arrays wrapping host memory run as host collectives in the library."""
  import gc
  import time
  import weakref
  import numpy as np
  import ringsync as rs
  from ringsync import _context
  rs.init()
  rank, size = rs.rank(), rs.size()
  total = size * (size + 1) // 2
  streams = _spy_streams()

  # In place, with the producer's stream: the library is told to wait for that stream.
  a = GpuArray(np.full(5, rank + 1, np.float32), stream=0x5000)
  assert rs.allreduce(a, out=a, name="in.place") is a
  assert a.array.tolist() == [total] * 5, a.array
  assert streams == [0x5000], streams

  # Into another GPU array whose producer used another stream: every stream is waited for.
  x = GpuArray(np.arange(4, dtype=np.int64) * (rank + 1), stream=0x5000)
  out = GpuArray(np.zeros((2, 2), np.int64), stream=0x6000)
  assert rs.allreduce(x, op=rs.Max, out=out, name="out") is out
  assert out.array.ravel().tolist() == [i * size for i in range(4)], out.array
  assert streams == [0x5000, 0], streams

  # Version 2 says nothing about streams (every stream: already set, so no new call).
  b = GpuArray(np.full(3, rank, np.float64), version=2)
  rs.broadcast(b, root=size - 1, out=b, name="bcast")
  assert b.array.tolist() == [size - 1] * 3, b.array
  assert streams == [0x5000, 0], streams

  # Allgather into a GPU array, in global rank order.
  g = GpuArray(np.zeros(2 * size, np.uint8), stream=0x7000)
  mine = GpuArray(np.full(2, 10 + rank, np.uint8), stream=0x7000)
  assert rs.allgather(mine, out=g, name="gather") is g
  assert g.array.tolist() == [10 + r for r in range(size) for _ in range(2)], g.array
  assert streams[-1] == 0x7000, streams

  # Async.
  h = rs.allreduce_async(a, out=a, name="async")
  assert h.wait() is a and a.array.tolist() == [total * size] * 5

  # ringsync cannot allocate memory of a library it does not know.
  for call in (lambda: rs.allreduce(a), lambda: rs.broadcast(a), lambda: rs.allgather(mine)):
    _raises_type(ValueError, ["__cuda_array_interface__", "cannot allocate", "out="], call)
  column = GpuArray(np.zeros((4, 2), np.float32)[:, 0])
  _raises_type(ValueError, ["non-contiguous"], rs.allreduce, column,
               out=GpuArray(np.zeros(4, np.float32)))
  _raises_type(ValueError, ["contiguous"], rs.allreduce, column, out=column)
  frozen = GpuArray(np.zeros(4, np.float32), readonly=True)
  _raises_type(ValueError, ["read-only"], rs.allreduce, frozen, out=frozen)
  # A GPU array and a numpy array in one call.
  _raises_type(TypeError, ["out is a numpy", "cuda_array"], rs.allreduce, a,
               out=np.zeros(5, np.float32))

  # The library's own answer for memory that is not on a GPU.
  _raises("INVALID_ARGUMENT", ["rs_register_device", "is not GPU memory"], rs.register_device,
          a)

  # A dropped handle: the connection keeps its buffers until the collective has completed
  # (the daemon would write GPU memory in place).
  devices = _context.current().devices
  d = GpuArray(np.full(3, rank + 1, np.float32))
  alive = weakref.ref(d)
  if rank == 0:
    rs.allreduce_async(d, out=d, name="dropped")  # the handle is dropped at once
    del d
    gc.collect()
    assert alive() is not None, "the buffers of a dropped GPU collective were released early"
    assert len(devices._abandoned) == 1, devices._abandoned
    rs.barrier(name="after.dropped")  # the other ranks submitted "dropped" before this
    deadline = time.monotonic() + 60  # a hang guard, not a measurement
    while alive() is not None:
      assert time.monotonic() < deadline, "the dropped collective never completed"
      devices.reap()
      gc.collect()
      time.sleep(0.01)
    assert not devices._abandoned
  else:
    rs.allreduce(d, out=d, name="dropped")
    rs.barrier(name="after.dropped")
  rs.shutdown()
  return True


def rank_fake_driver(libcuda):
  """One rank with the stand-in driver loaded: host memory it declares is GPU memory."""
  import numpy as np
  import ringsync as rs
  from ringsync import _capi
  rs.init()
  fake = ctypes.CDLL(libcuda, mode=ctypes.RTLD_GLOBAL)
  fake.fake_cuda_declare.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]

  def pointer(array):
    return array.__array_interface__["data"][0]
  gpu = np.zeros(1024, np.float32)
  pool = np.zeros(256, np.float32)
  host = np.ones(8, np.float32)
  assert fake.fake_cuda_declare(pointer(gpu), gpu.nbytes, 1) == 0
  assert fake.fake_cuda_declare(pointer(pool), pool.nbytes, 0) == 0
  lib = _capi.lib()
  # The library sees the stand-in driver (else the rest would prove nothing).
  assert lib.rs_is_device_pointer(pointer(gpu) + 64) == 1
  assert lib.rs_is_device_pointer(pointer(host)) == 0

  a = GpuArray(gpu[16:24], stream=0x5000)
  refused = _raises("INVALID_ARGUMENT", ["ringsyncd cannot use GPU memory"], rs.allreduce, a,
                    out=a, name="on.gpu")
  _raises("INVALID_ARGUMENT", ["ringsyncd cannot use GPU memory"], rs.register_device, a)
  # Memory-pool memory is refused by the library before anything is sent.
  p = GpuArray(pool[:8])
  _raises("INVALID_ARGUMENT", ["CUDA IPC cannot share", "expandable segments"], rs.broadcast, p,
          out=p, name="pool")
  # GPU input, host output: the library's rule (Python cannot tell: both are GPU arrays).
  _raises("INVALID_ARGUMENT", ["is GPU memory but", "is host memory"], rs.allreduce,
          GpuArray(gpu[:8]), out=GpuArray(host), name="mixed")
  # The connection still serves host memory.
  assert rs.allreduce(np.ones(3), name="host").tolist() == [1.0, 1.0, 1.0]
  rs.shutdown()
  return refused.message


class DeviceRoutingTest(unittest.TestCase):
  """In this process, without a daemon: what is refused before anything is sent."""

  @classmethod
  def setUpClass(cls):
    os.environ["RINGSYNC_LIBRARY"] = harness.library()

  @unittest.skipUnless(HAVE_TORCH, "torch is not installed")
  def test_devices_other_than_cuda_are_refused(self):
    import torch
    import ringsync as rs
    meta = torch.empty(4, device="meta")
    for call in (rs.allreduce, rs.broadcast, rs.register_device):
      with self.assertRaises(rs.RingsyncError) as caught:
        call(meta)  # refused before the connection is needed (there is none here)
      self.assertEqual(caught.exception.status, "UNSUPPORTED")
      self.assertIn("device 'meta'", caught.exception.message)
      self.assertIn("CUDA", caught.exception.message)

  @unittest.skipUnless(HAVE_TORCH, "torch is not installed")
  def test_one_device_per_call(self):
    import numpy as np
    import torch
    import ringsync as rs
    cpu, meta = torch.zeros(4), torch.empty(4, device="meta")
    with self.assertRaises(ValueError) as caught:
      rs.allreduce(cpu, out=meta)
    self.assertIn("the input is on the CPU (host memory) but out is on device 'meta'",
                  str(caught.exception))
    self.assertIn("cannot be mixed", str(caught.exception))
    with self.assertRaisesRegex(ValueError, "input is on device 'meta' but out is on the CPU"):
      rs.broadcast(meta, out=cpu)
    with self.assertRaisesRegex(TypeError, "out is a torch but the input is a numpy"):
      rs.allreduce(np.zeros(4, np.float32), out=meta)

  @unittest.skipUnless(HAVE_TORCH, "torch is not installed")
  def test_out_of_place_results_are_made_on_the_input_device(self):
    import torch
    from ringsync import _collectives, _devices, _tensors
    column = torch.empty(4, 3, device="meta")[:, 1]  # not contiguous
    view = _tensors.View(column, "allreduce")
    self.assertFalse(view.contiguous)
    send, recv = _collectives._output("allreduce", view, None, view.shape)
    for made in (send, recv):
      self.assertEqual(made.obj.device.type, "meta")
      self.assertTrue(made.contiguous)
      self.assertEqual(made.shape, (4,))
    self.assertIsNot(send.obj, column)
    _, gathered = _collectives._output("allgather", view, None, (12,))
    self.assertEqual((gathered.obj.device.type, gathered.shape), ("meta", (12,)))
    with self.assertRaisesRegex(ValueError, "contiguous"):
      _collectives._output("allreduce", view, column, view.shape)  # in place
    # The same call on the CPU stays on the host route.
    host = _tensors.View(torch.zeros(4, 3)[:, 1], "allreduce")
    self.assertIsNone(_devices.route("allreduce", host,
                                     *_collectives._output("allreduce", host, None, (4,))))

  def test_gpu_array_interface_is_checked(self):
    import numpy as np
    import ringsync as rs
    from ringsync import _tensors
    view = _tensors.View(GpuArray(np.zeros((2, 3), np.int32), stream=7), "x")
    self.assertEqual((view.framework, view.device, view.dtype_name, view.count, view.stream),
                     ("cuda_array", "cuda", "int32", 6, 7))
    self.assertTrue(view.contiguous and view.writeable)
    self.assertIsNone(_tensors.View(GpuArray(np.zeros(2), stream=7, version=2), "x").stream)
    for typestr in (">f4" if np.little_endian else "<f4", "<i2", "|b1", "<c8"):
      with self.assertRaisesRegex(TypeError, "does not support the GPU array dtype"):
        rs.allreduce(GpuArray(np.zeros(2, np.float32), typestr=typestr))
    with self.assertRaisesRegex(TypeError, "masked"):
      rs.allreduce(GpuArray(np.zeros(2, np.float32), mask=object()))
    broken = GpuArray(np.zeros(2, np.float32))
    del broken.__cuda_array_interface__["data"]
    with self.assertRaisesRegex(TypeError, "malformed __cuda_array_interface__"):
      rs.allreduce(broken)


class DeviceDaemonTest(unittest.TestCase):
  """Against a real daemon."""

  def test_gpu_array_interface_collectives(self):
    with harness.Daemon() as daemon:
      results = harness.run_ranks(daemon, 2, "test_api_devices:rank_gpu_arrays", timeout=120)
    harness.check_ranks(results)

  def test_daemon_refusal_reaches_python(self):
    libcuda = os.environ.get("RINGSYNC_TEST_FAKE_LIBCUDA", "")
    if not os.path.exists(libcuda):
      self.skipTest("the stand-in CUDA driver is not built (run under ctest, which sets "
                    "RINGSYNC_TEST_FAKE_LIBCUDA)")
    with harness.Daemon() as daemon:
      results = harness.run_ranks(daemon, 1, "test_api_devices:rank_fake_driver",
                                  args=[libcuda], timeout=120)
    harness.check_ranks(results)
    # The daemon says why: built without CUDA, or no device it can use.
    message = results[0].value
    self.assertTrue("built without CUDA" in message or "no CUDA device" in message, message)


if __name__ == "__main__":
  unittest.main()
