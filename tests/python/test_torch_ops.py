"""ringsync.torch's collectives and helpers on real ranks: broadcast_optimizer_state, autograd
through allreduce / allgather / broadcast, fp16 compression, in-place and async forms (wait
with a timeout), DistributedOptimizer when one bucket fails; plus DistributedOptimizer's
argument checks and zero_grad(), and the handles' timeouts (in this process, no daemon
needed).

Three ranks (an odd size) on one daemon run every check in one launch; each check's values
or its traceback come back per check, so each test method reports its own failure.
"""

import sys
import traceback
import unittest

import harness

try:
  import torch
except ImportError:  # the tests skip themselves
  torch = None

RANKS = 3


# --- the checks, run in every rank -----------------------------------------------------------

def check_optimizer_state(rst, rank):
  """Different Adam states per rank; root 1's wins everywhere, exactly (lr included)."""
  torch.manual_seed(0)
  model = torch.nn.Linear(4, 3)
  optimizer = torch.optim.Adam(model.parameters(), lr=0.1 * (rank + 1),
                               betas=(0.8, 0.9 + rank / 100))
  for step in range(rank + 1):
    model.zero_grad()
    model(torch.full((2, 4), float(rank + step))).sum().backward()
    optimizer.step()
  before = _state(optimizer)
  rst.broadcast_optimizer_state(optimizer, root_rank=1)
  after = _state(optimizer)
  # A fresh optimizer on the root: everyone ends up without state (no step is faked).
  fresh = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
  if rank != 0:
    model.zero_grad()
    model(torch.ones(1, 4)).sum().backward()
    fresh.step()
  rst.broadcast_optimizer_state(fresh, root_rank=0)
  # A DistributedOptimizer's state can be broadcast like any other.
  wrapped = rst.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1 + rank,
                                                     momentum=0.9),
                                     named_parameters=model.named_parameters())
  rst.broadcast_optimizer_state(wrapped, root_rank=2)
  return {"before": before, "after": after, "fresh_state_len": len(fresh.state_dict()["state"]),
          "wrapped_lr": wrapped.param_groups[0]["lr"]}


def _state(optimizer):
  sd = optimizer.state_dict()
  return {"groups": [{k: v for k, v in g.items()} for g in sd["param_groups"]],
          "state": {str(k): {n: (v.tolist() if torch.is_tensor(v) else v) for n, v in s.items()}
                    for k, s in sd["state"].items()}}


def check_allreduce_grad(rst, rank):
  size = rst.size()
  weights = sum(range(1, size + 1))
  x = torch.full((2, 3), float(rank), requires_grad=True)
  y = rst.allreduce(x, op=rst.Sum, name="autograd.sum")
  (y * (rank + 1)).sum().backward()
  assert torch.equal(y, torch.full((2, 3), float(sum(range(size))))), y
  assert torch.equal(x.grad, torch.full((2, 3), float(weights))), x.grad
  x = torch.full((4,), float(rank), requires_grad=True)
  y = rst.allreduce(x, name="autograd.avg")  # Average by default, as in Horovod
  (y * (rank + 1)).sum().backward()
  assert torch.allclose(y, torch.full((4,), (size - 1) / 2)), y
  assert torch.allclose(x.grad, torch.full((4,), weights / size)), x.grad
  return True


def check_allgather_grad(rst, rank):
  size = rst.size()
  x = torch.full((rank + 1, 2), float(rank), requires_grad=True)  # first dims differ
  y = rst.allgather(x, name="autograd.gather")
  rows = sum(r + 1 for r in range(size))
  expected = torch.cat([torch.full((r + 1, 2), float(r)) for r in range(size)])
  assert torch.equal(y, expected), y
  pattern = torch.arange(rows * 2, dtype=torch.float32).reshape(rows, 2)
  (y * pattern * (rank + 1)).sum().backward()
  offset = sum(r + 1 for r in range(rank))
  summed = pattern * sum(range(1, size + 1))
  assert torch.equal(x.grad, summed[offset:offset + rank + 1]), x.grad
  return True


def check_broadcast_grad(rst, rank):
  size = rst.size()
  x = torch.full((3,), float(rank), requires_grad=True)
  y = rst.broadcast(x, root_rank=size - 1, name="autograd.bcast")
  assert torch.equal(y, torch.full((3,), float(size - 1))), y
  (y * (rank + 1)).sum().backward()
  expected = float(sum(range(1, size + 1))) if rank == size - 1 else 0.0
  assert torch.equal(x.grad, torch.full((3,), expected)), x.grad
  return True


def check_fp16(rst, rank):
  size = rst.size()
  exact = rst.allreduce(torch.full((5,), rank + 0.5), op=rst.Sum, name="fp16.exact",
                        compression=rst.Compression.fp16)
  assert exact.dtype == torch.float32, exact.dtype
  assert torch.equal(exact, torch.full((5,), sum(r + 0.5 for r in range(size)))), exact
  third = rst.allreduce(torch.full((5,), 1 / 3, dtype=torch.float64), name="fp16.inexact",
                        compression=rst.Compression.fp16)
  assert third.dtype == torch.float64, third.dtype
  assert not torch.equal(third, torch.full((5,), 1 / 3, dtype=torch.float64))  # it did round
  assert torch.allclose(third, torch.full((5,), 1 / 3, dtype=torch.float64), rtol=1e-3), third
  # DistributedOptimizer: float16 buckets on the wire, float32 gradients close to exact ones.
  grads = {}
  for compression in (rst.Compression.none, rst.Compression.fp16):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    optimizer = rst.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                         named_parameters=model.named_parameters(),
                                         compression=compression)
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(rank))
    model(x).pow(2).sum().backward()
    optimizer.synchronize()
    wire = {b.wire_dtype for b in optimizer._rs_buckets}
    assert wire == {torch.float16 if compression is rst.Compression.fp16 else torch.float32}, wire
    assert all(b.zero_copy for b in optimizer._rs_buckets)
    grads[compression] = [p.grad.clone() for p in model.parameters()]
    optimizer.step()
  for exact_grad, fp16_grad in zip(grads[rst.Compression.none], grads[rst.Compression.fp16]):
    assert fp16_grad.dtype == torch.float32
    assert torch.allclose(fp16_grad, exact_grad, rtol=1e-2, atol=1e-3), (fp16_grad, exact_grad)
  return True


def check_in_place_and_async(rst, rank):
  size = rst.size()
  base = torch.arange(6, dtype=torch.float32).reshape(2, 3) + rank
  transposed = base.t()  # not contiguous
  assert rst.allreduce_(transposed, op=rst.Sum, name="inplace.t") is transposed
  expected = (torch.arange(6, dtype=torch.float32).reshape(2, 3) * size + sum(range(size))).t()
  assert torch.equal(transposed, expected), transposed
  flags = torch.tensor([rank == 0, rank != 0, True])
  rst.broadcast_(flags, root_rank=0, name="inplace.bool")
  assert flags.tolist() == [True, False, True], flags
  scalar = rst.allreduce(torch.tensor(float(rank)), op=rst.Max, name="scalar")
  assert scalar.shape == () and scalar.item() == size - 1, scalar
  counts = torch.tensor([rank, 1], dtype=torch.int64)
  handle = rst.allreduce_async_(counts, op=rst.Sum, name="async.int64")
  assert rst.synchronize(handle) is counts and rst.poll(handle)
  assert counts.tolist() == [sum(range(size)), size], counts
  handle = rst.allgather_async(torch.tensor([rank]), name="async.gather")
  assert rst.synchronize(handle).tolist() == list(range(size))
  obj = rst.broadcast_object({"rank": rank, "nested": [1, (2, 3)]}, root_rank=1)
  assert obj == {"rank": 1, "nested": [1, (2, 3)]}, obj
  return True


def check_in_place_wait_timeout(rst, rank):
  """wait(timeout) on an in-place allreduce of a non-contiguous tensor (a handle chained
  after a temporary's) times out while the other ranks have not submitted it yet."""
  t = torch.ones(4, 3).t()  # not contiguous
  if rank == 0:
    handle = rst.allreduce_async_(t, op=rst.Sum, name="chained.late")
    # The others submit only after the gate, which needs this rank: cannot be complete here.
    try:
      handle.wait(timeout=0.05)
      raise AssertionError("wait(timeout) returned before every rank submitted")
    except TimeoutError:
      pass
    assert not handle.done()
    rst.barrier(name="chained.gate")
    assert handle.wait() is t
  else:
    rst.barrier(name="chained.gate")
    rst.allreduce_(t, op=rst.Sum, name="chained.late")
  assert torch.equal(t, torch.full((3, 4), float(rst.size()))), t
  return True


def check_synchronize_drains_after_failure(rst, rank):
  """One bucket fails (the ranks disagree on its size): synchronize() raises that error only
  after waiting for the other buckets, whose allreduces still run in their buffers."""
  a = torch.nn.Parameter(torch.ones(3 + (rank == 0)))  # rank 0's differs: MISMATCH
  b = torch.nn.Parameter(torch.ones(2))
  optimizer = rst.DistributedOptimizer(torch.optim.SGD([b, a], lr=0.1),
                                       named_parameters=[("drain.b", b), ("drain.a", a)],
                                       bucket_bytes=1)
  (a.sum() + b.sum()).backward()
  buckets = optimizer._rs_buckets  # reverse registration order: a's bucket finishes first
  assert [bk.names for bk in buckets] == [["drain.a"], ["drain.b"]], optimizer.buckets
  started = [bk.handle for bk in buckets]
  assert all(h is not None for h in started), "the buckets did not start during backward"
  try:
    optimizer.synchronize()
    raise AssertionError("synchronize() with mismatched buckets did not raise")
  except rst.RingsyncError as e:
    assert e.status == "MISMATCH" and "drain.a" in e.message, e
  for handle in started:  # waited for by synchronize(): repr() says "pending" until then
    assert "pending" not in repr(handle), "a bucket's allreduce was left running: %r" % handle
  assert not any(bk.started for bk in buckets)
  optimizer.zero_grad()  # allowed again: nothing is being reduced
  return True


CHECKS = ["check_optimizer_state", "check_allreduce_grad", "check_allgather_grad",
          "check_broadcast_grad", "check_fp16", "check_in_place_and_async",
          "check_in_place_wait_timeout", "check_synchronize_drains_after_failure"]


def ops_rank():
  """A rank: every check in order; {check: value} or {check: {"error": traceback}}."""
  import ringsync.torch as rst
  rst.init()
  results = {}
  for name in CHECKS:
    try:
      results[name] = globals()[name](rst, rst.rank())
    except Exception:  # noqa: B902 - reported per check; later checks still run
      results[name] = {"error": traceback.format_exc()}
      traceback.print_exc()
  rst.barrier(name="ops.done")
  rst.shutdown()
  return results


# --- the tests -------------------------------------------------------------------------------

@unittest.skipIf(torch is None, "PyTorch is not installed")
class TorchOpsTest(unittest.TestCase):
  @classmethod
  def setUpClass(cls):
    with harness.Daemon() as daemon:
      results = harness.run_ranks(daemon, RANKS, "test_torch_ops:ops_rank", timeout=120)
      harness.check_ranks(results)
    cls.values = [r.value for r in results]

  def value(self, rank, check):
    value = self.values[rank][check]
    if isinstance(value, dict) and "error" in value:
      self.fail("rank %d, %s:\n%s" % (rank, check, value["error"]))
    return value

  def each_rank(self, check):
    for rank in range(RANKS):
      self.assertTrue(self.value(rank, check))

  def test_broadcast_optimizer_state(self):
    root = self.value(1, "check_optimizer_state")["before"]
    self.assertEqual(root["groups"][0]["lr"], 0.2)
    for rank in range(RANKS):
      value = self.value(rank, "check_optimizer_state")
      self.assertEqual(value["after"], root, "rank %d" % rank)
      self.assertEqual(value["fresh_state_len"], 0, "rank %d" % rank)
      self.assertEqual(value["wrapped_lr"], 2.1, "rank %d" % rank)
    self.assertNotEqual(self.value(0, "check_optimizer_state")["before"], root)

  def test_allreduce_autograd(self):
    self.each_rank("check_allreduce_grad")

  def test_allgather_autograd_with_different_first_dims(self):
    self.each_rank("check_allgather_grad")

  def test_broadcast_autograd(self):
    self.each_rank("check_broadcast_grad")

  def test_fp16_compression(self):
    self.each_rank("check_fp16")

  def test_in_place_async_and_objects(self):
    self.each_rank("check_in_place_and_async")

  def test_in_place_wait_timeout(self):
    self.each_rank("check_in_place_wait_timeout")

  def test_synchronize_waits_for_every_bucket_when_one_fails(self):
    self.each_rank("check_synchronize_drains_after_failure")


@unittest.skipIf(torch is None, "PyTorch is not installed")
class DistributedOptimizerArgumentsTest(unittest.TestCase):
  """Checked when the optimizer is built: no daemon needed."""

  @classmethod
  def setUpClass(cls):
    sys.path.insert(0, harness.PYTHON_PACKAGE_DIR)
    import ringsync.torch as rst
    cls.rst = rst

  def setUp(self):
    self.model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Linear(3, 1))

  def wrap(self, **kwargs):
    return self.rst.DistributedOptimizer(torch.optim.SGD(self.model.parameters(), lr=0.1),
                                         **kwargs)

  def test_duplicate_names(self):
    pairs = [("same", p) for p in self.model.parameters()]
    with self.assertRaisesRegex(ValueError, "unique.*same"):
      self.wrap(named_parameters=pairs)

  def test_missing_names(self):
    pairs = list(self.model.named_parameters())[1:]
    with self.assertRaisesRegex(ValueError, r"1 of the optimizer's parameters are not in it"):
      self.wrap(named_parameters=pairs)

  def test_not_pairs(self):
    with self.assertRaisesRegex(ValueError, "pairs"):
      self.wrap(named_parameters=self.model.parameters())

  def test_op_must_be_sum_or_average(self):
    with self.assertRaisesRegex(ValueError, "Average or Sum"):
      self.wrap(named_parameters=self.model.named_parameters(), op=self.rst.Max)

  def test_zero_grad_takes_the_wrapped_optimizers_arguments(self):
    def grads_after(optimizer, *args, **kwargs):
      for p in self.model.parameters():
        p.grad = torch.ones_like(p)
      optimizer.zero_grad(*args, **kwargs)
      return [None if p.grad is None else p.grad.tolist() for p in self.model.parameters()]

    plain = torch.optim.SGD(self.model.parameters(), lr=0.1)
    wrapped = self.wrap(named_parameters=self.model.named_parameters())
    self.assertEqual(grads_after(wrapped), grads_after(plain))  # the same default
    for args, kwargs in (((True,), {}), ((), {"set_to_none": True}), ((False,), {})):
      self.assertEqual(grads_after(wrapped, *args, **kwargs),
                       grads_after(plain, *args, **kwargs))

  def test_same_class_and_buckets_in_reverse_order(self):
    optimizer = self.wrap(named_parameters=self.model.named_parameters(), bucket_bytes=0)
    self.assertIsInstance(optimizer, torch.optim.SGD)
    self.assertEqual([params for _, params in optimizer.buckets],
                     [["1.bias"], ["1.weight"], ["0.bias"], ["0.weight"]])
    names = [name for name, _ in optimizer.buckets]
    self.assertEqual(len(set(names)), len(names))


class _Clock:
  def __init__(self):
    self.now = 100.0

  def monotonic(self):
    return self.now


class _CoreHandle:
  """Stands for a core handle: wait(timeout) records its timeout and takes `cost` seconds of
  the fake clock."""

  def __init__(self, clock, cost):
    self.clock, self.cost, self.timeout = clock, cost, "not waited"

  def wait(self, timeout=None):
    self.timeout = timeout
    self.clock.now += self.cost
    return self.cost

  def done(self):
    return True


@unittest.skipIf(torch is None, "PyTorch is not installed")
class HandleTimeoutTest(unittest.TestCase):
  """ringsync.torch.Handle's timeout is one deadline for all of its core handles: no daemon
  needed (a fake clock and fake core handles)."""

  @classmethod
  def setUpClass(cls):
    sys.path.insert(0, harness.PYTHON_PACKAGE_DIR)
    from ringsync.torch import handle
    cls.module = handle

  def setUp(self):
    self.clock = _Clock()
    self.saved_time, self.module.time = self.module.time, self.clock

  def tearDown(self):
    self.module.time = self.saved_time

  def test_one_deadline_for_every_core_handle(self):
    cores = [_CoreHandle(self.clock, 0.75), _CoreHandle(self.clock, 0.5),
             _CoreHandle(self.clock, 0.0)]
    handle = self.module.Handle(cores, lambda results: results)
    self.assertEqual(handle.wait(timeout=1.0), [0.75, 0.5, 0.0])
    self.assertEqual([c.timeout for c in cores], [1.0, 0.25, 0.0])

  def test_no_timeout_and_chained(self):
    core = _CoreHandle(self.clock, 0.5)
    inner = self.module.Handle([core], lambda results: results[0])
    chained = self.module.Chained(inner, lambda result: result * 2)
    self.assertEqual(chained.wait(timeout=2.0), 1.0)
    self.assertEqual(core.timeout, 2.0)
    self.assertTrue(chained.done())
    again = _CoreHandle(self.clock, 0.1)
    self.assertEqual(self.module.Handle([again], lambda results: results).wait(), [0.1])
    self.assertIsNone(again.timeout)


if __name__ == "__main__":
  unittest.main()
