"""CUDA tensors through the daemon, on a machine with a GPU (skipped elsewhere).

Two local ranks of one daemon, each on a GPU (local rank modulo the GPUs torch sees, so both may
share one), run the core collectives and the ringsync.torch layer on CUDA tensors; each rank
knows every rank's input and checks its results element by element. The stream tests queue a
long kernel ahead of the writes that fill a tensor, then submit the collective at once: only
the library waiting for the caller's current stream gives the right sums.
"""

import importlib.util
import unittest

import harness


def _cuda_available():
  if importlib.util.find_spec("torch") is None:
    return False
  import torch
  return torch.cuda.is_available()


HAVE_CUDA = _cuda_available()
NO_CUDA = "needs torch with a CUDA GPU (torch.cuda.is_available() is False here)"
SLEEP_CYCLES = int(1e9)  # torch.cuda._sleep: a kernel that keeps its stream busy (~0.5 s)


def _setup():
  import torch
  import ringsync as rs
  rs.init()
  device = torch.device("cuda", rs.local_rank() % torch.cuda.device_count())
  torch.cuda.set_device(device)
  return torch, rs, device


def _check(torch, device, got, want, what):
  """got (on `device`) equals want (a tensor or nested list, compared in float64)."""
  assert got.device == device, "%s: on %s, want %s" % (what, got.device, device)
  want = torch.as_tensor(want, dtype=torch.float64)
  values = got.detach().to("cpu", torch.float64)
  assert values.shape == want.shape and torch.equal(values, want), (
      "%s: got %s, want %s" % (what, values.tolist(), want.tolist()))


def _busy(torch):
  """Queues a long kernel on the current stream (when torch offers one)."""
  sleep = getattr(torch.cuda, "_sleep", None)
  if sleep is not None:
    sleep(SLEEP_CYCLES)
  else:
    a = torch.randn(4096, 4096, device="cuda")
    for _ in range(20):
      a = a @ a / 4096


def rank_core():
  torch, rs, dev = _setup()
  rank, size = rs.rank(), rs.size()
  ranks_sum = size * (size - 1) // 2
  total = size * (size + 1) // 2

  # allreduce: every dtype, out of place (x unchanged) and in place.
  for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32,
                torch.int64, torch.uint8):
    n = 37
    base = torch.arange(n, dtype=torch.float64) % 50
    want = base * size + ranks_sum
    x = (base + rank).to(dtype).to(dev)
    name = str(dtype).replace("torch.", "")
    got = rs.allreduce(x, name="sum." + name)
    assert got.dtype == dtype and got is not x
    _check(torch, dev, got, want, "allreduce " + name)
    _check(torch, dev, x, base + rank, "allreduce input " + name)
    assert rs.allreduce(x, out=x, name="inplace." + name) is x
    _check(torch, dev, x, want, "allreduce in place " + name)

  # Ops.
  ones = torch.full((5,), float(rank + 1), device=dev)
  _check(torch, dev, rs.allreduce(ones, op=rs.Average, name="avg"), [total / size] * 5, "avg")
  _check(torch, dev, rs.allreduce(ones.to(torch.int32), op=rs.Max, name="max"), [size] * 5,
         "max")
  _check(torch, dev, rs.allreduce(ones, op=rs.Min, name="min"), [1] * 5, "min")
  factorial = 1
  for r in range(1, size + 1):
    factorial *= r
  _check(torch, dev, rs.allreduce(ones, op=rs.Product, name="prod"), [factorial] * 5, "prod")

  # Large (several MiB), at an offset into its allocation, in place.
  big = torch.zeros((1 << 21) + 9, device=dev)
  part = big[7:7 + (1 << 21)]
  part.fill_(rank + 1)
  rs.allreduce(part, out=part, name="big")
  assert bool(torch.all(part == total)) and float(big[:7].abs().sum()) == 0.0

  # A non-contiguous input: copied on the device; the result is new and contiguous.
  grid = torch.arange(12, dtype=torch.float32, device=dev).reshape(3, 4).t() + rank
  got = rs.allreduce(grid, name="noncontig")
  assert got.is_contiguous() and got.shape == (4, 3)
  _check(torch, dev, got, torch.arange(12.).reshape(3, 4).t() * size + ranks_sum, "noncontig")

  # out= another CUDA tensor (its own shape), a 0-d tensor, async.
  out = torch.empty(6, device=dev)
  assert rs.allreduce(torch.full((2, 3), float(rank), device=dev), out=out, name="out") is out
  _check(torch, dev, out, [ranks_sum] * 6, "out")
  scalar = rs.allreduce(torch.tensor(float(rank + 1), device=dev), name="scalar")
  _check(torch, dev, scalar, total, "0-d")
  handles = [rs.allreduce_async(torch.full((3,), float(i + rank), device=dev),
                                name="async.%d" % i) for i in range(4)]
  for i, handle in enumerate(handles):
    _check(torch, dev, handle.wait(), [i * size + ranks_sum] * 3, "async %d" % i)

  # broadcast: out of place from the last rank, in place from rank 0.
  x = torch.full((4,), float(rank), device=dev)
  _check(torch, dev, rs.broadcast(x, root=size - 1, name="bcast"), [size - 1] * 4, "bcast")
  y = torch.full((2, 2), float(rank + 5), device=dev)
  assert rs.broadcast(y, root=0, out=y, name="bcast.inplace") is y
  _check(torch, dev, y, [[5, 5], [5, 5]], "bcast in place")

  # allgather: out of place, and in place (x is the rank-th slice of out).
  got = rs.allgather(torch.full((2, 3), float(rank), device=dev), name="gather")
  _check(torch, dev, got, [[r] * 3 for r in range(size) for _ in range(2)], "allgather")
  buf = torch.zeros(2 * size, device=dev)
  mine = buf[2 * rank:2 * rank + 2]
  mine.fill_(rank + 1)
  assert rs.allgather(mine, out=buf, name="gather.inplace") is buf
  _check(torch, dev, buf, [r + 1 for r in range(size) for _ in range(2)], "allgather in place")

  # Host and GPU memory in one call, or two GPUs: refused before anything is sent.
  try:
    rs.allreduce(torch.zeros(4), out=torch.zeros(4, device=dev))
    raise AssertionError("a CPU input with a CUDA out was accepted")
  except ValueError as e:
    assert "cannot be mixed" in str(e), e
  if torch.cuda.device_count() > 1:
    other = torch.device("cuda", (dev.index + 1) % torch.cuda.device_count())
    try:
      rs.allreduce(torch.zeros(4, device=dev), out=torch.zeros(4, device=other))
      raise AssertionError("tensors on two GPUs were accepted")
    except ValueError as e:
      assert "same device" in str(e), e

  # Stream semantics: the writes are still queued (behind a long kernel) when the collective
  # is submitted; the library waits for the current stream first.
  side = torch.cuda.Stream(device=dev)
  x = torch.zeros(1 << 20, device=dev)
  torch.cuda.synchronize(dev)
  with torch.cuda.stream(side):
    _busy(torch)
    x.fill_(rank + 1)
    got = rs.allreduce(x, name="stream.side")
  assert bool(torch.all(got == total)), "side stream: %s" % got[:4].tolist()
  z = torch.zeros(1 << 20, device=dev)  # the default stream (torch's handle 0)
  _busy(torch)
  z.fill_(rank + 1)
  rs.allreduce(z, out=z, name="stream.default")
  assert bool(torch.all(z == total)), "default stream: %s" % z[:4].tolist()
  # The results are complete when wait() returns: a kernel queued afterwards on another
  # stream reads them.
  with torch.cuda.stream(side):
    h = rs.allreduce_async(z, out=z, name="stream.after")
    h.wait()
    doubled = z * 2
  side.synchronize()
  assert bool(torch.all(doubled == 2 * total * size))

  # register_device: already registered by the collectives above; ahead of use for new memory.
  rs.register_device(torch.empty(1 << 22, device=dev))
  rs.shutdown()
  return True


def rank_torch_layer():
  torch, rs, dev = _setup()
  import ringsync.torch as rst
  rank, size = rst.rank(), rst.size()
  total = size * (size + 1) // 2

  x = torch.full((3, 4), float(rank + 1), device=dev)
  _check(torch, dev, rst.allreduce(x, name="t.avg"), torch.full((3, 4), total / size), "avg")
  grid = torch.zeros(4, 3, device=dev).t()  # not contiguous: through a temporary
  grid.fill_(rank + 1)
  assert rst.allreduce_(grid, op=rst.Sum, name="t.inplace") is grid
  _check(torch, dev, grid, torch.full((3, 4), float(total)), "allreduce_")
  rows = rst.allgather(torch.full((rank + 1, 2), float(rank), device=dev), name="t.gather")
  _check(torch, dev, rows, [[r, r] for r in range(size) for _ in range(r + 1)], "allgather")

  # Every rank starts from rank 0's weights.
  torch.manual_seed(100 + rank)
  model = torch.nn.Linear(4, 2).to(dev)
  rst.broadcast_parameters(model.state_dict(), root_rank=0)
  weights = rst.allgather(model.weight.detach().reshape(1, -1), name="t.weights")
  assert bool(torch.all(weights == weights[0])), "broadcast_parameters"

  # One step of DistributedOptimizer: the gradient is the average of every rank's.
  w0, b0 = model.weight.detach().clone(), model.bias.detach().clone()
  sgd = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
  opt = rst.DistributedOptimizer(sgd, named_parameters=model.named_parameters())
  opt.zero_grad()
  model(torch.full((3, 4), float(rank + 1), device=dev)).sum().backward()
  opt.step()
  for bucket in opt._rs_buckets:
    assert bucket.buffer.device == dev, "bucket %s on %s" % (bucket.name, bucket.buffer.device)
  grad_w = 3.0 * total / size  # d(sum(x W^T + b))/dW = column sums of x
  _check(torch, dev, model.weight.grad, torch.full((2, 4), grad_w), "averaged weight grad")
  _check(torch, dev, model.bias.grad, [3.0, 3.0], "averaged bias grad")
  assert torch.allclose(model.weight.detach(), w0 - 0.1 * grad_w)
  assert torch.allclose(model.bias.detach(), b0 - 0.3)

  # The optimizer state (momentum buffers on the GPU) comes from rank 0.
  if rank != 0:
    for state in opt.state.values():
      state["momentum_buffer"].fill_(-1.0)
  rst.broadcast_optimizer_state(opt, root_rank=0)
  for p in model.parameters():
    buffer = opt.state[p]["momentum_buffer"]
    assert buffer.device == dev, buffer.device
    assert torch.allclose(buffer, p.grad), "momentum buffer %s" % buffer.tolist()
  rst.shutdown()
  return True


def rank_expandable_segments():
  torch, rs, dev = _setup()
  x = torch.ones(1024, device=dev)
  try:
    rs.allreduce(x, out=x, name="pool")
  except rs.RingsyncError as e:
    assert e.status == "INVALID_ARGUMENT", e
    return e.message
  raise AssertionError("memory from expandable segments was not refused")


@unittest.skipUnless(HAVE_CUDA, NO_CUDA)
class CudaTensorTest(unittest.TestCase):

  def _run(self, target, size=2, env=None):
    with harness.Daemon() as daemon:
      results = harness.run_ranks(daemon, size, target, timeout=300, env=env)
      log = daemon.log()
    if not all(r.ok for r in results) and "built without CUDA" in "".join(
        r.stderr for r in results):
      self.skipTest("this build's ringsyncd has no CUDA support (nvcc was not found)")
    harness.check_ranks(results)
    return results, log

  def test_core_collectives(self):
    self._run("test_torch_cuda:rank_core")

  def test_torch_layer(self):
    self._run("test_torch_cuda:rank_torch_layer")

  def test_memory_cuda_ipc_cannot_share_is_refused(self):
    import torch
    major, minor = (int(v) for v in torch.__version__.split(".")[:2])
    if (major, minor) < (2, 1):
      self.skipTest("torch %s has no expandable segments" % torch.__version__)
    results, _ = self._run("test_torch_cuda:rank_expandable_segments", size=1,
                           env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
    self.assertIn("CUDA IPC cannot share", results[0].value)


if __name__ == "__main__":
  unittest.main()
