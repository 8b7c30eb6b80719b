"""The core Python API against a real ringsyncd: every collective x dtype on numpy arrays and
torch tensors, in and out of place, blocking and async.

Each test runs a few rank processes (harness.run_ranks); a rank function checks its own
results (every rank knows every rank's input) and fails with the mismatch. Many checks share
one process start, so the file runs in seconds.
"""

import importlib.util
import unittest

import harness

HAVE_TORCH = importlib.util.find_spec("torch") is not None
NUMPY_DTYPES = ["float32", "float64", "float16", "int32", "int64", "uint8"]
TORCH_DTYPES = NUMPY_DTYPES + ["bfloat16"]
OPS = ["sum", "avg", "min", "max", "prod"]


class Arrays:
  """Builds inputs and reads results the same way for numpy and torch."""

  def __init__(self, framework):
    import numpy
    self.np = numpy
    self.framework = framework
    if framework == "torch":
      import torch
      self.torch = torch

  def make(self, values, dtype):
    """An array/tensor of `dtype` holding `values` (a numpy array of exact small numbers)."""
    values = self.np.asarray(values)
    if self.framework == "numpy":
      return values.astype(dtype)
    return self.torch.from_numpy(values.copy()).to(getattr(self.torch, dtype))

  def values(self, x):
    """x as a float64 numpy array (bfloat16 has no numpy form)."""
    if self.framework == "numpy":
      return x.astype(self.np.float64)
    return x.to(self.torch.float64).numpy()

  def native_type(self):
    return self.np.ndarray if self.framework == "numpy" else self.torch.Tensor

  def contiguous(self, x):
    return x.flags.c_contiguous if self.framework == "numpy" else x.is_contiguous()

  def dtype_name(self, x):
    return str(x.dtype).replace("torch.", "")

  def expect(self, got, want, what, dtype, shape=None):
    """Fails unless `got` is a `dtype` array of `shape` (default: want's) equal to `want`."""
    want = self.np.asarray(want, dtype=self.np.float64)
    shape = want.shape if shape is None else shape
    if not isinstance(got, self.native_type()):
      raise AssertionError("%s: got a %s, not a %s" % (what, type(got).__name__, self.framework))
    if self.dtype_name(got) != dtype:
      raise AssertionError("%s: dtype %s, want %s" % (what, got.dtype, dtype))
    if tuple(got.shape) != tuple(shape):
      raise AssertionError("%s: shape %s, want %s" % (what, tuple(got.shape), tuple(shape)))
    rtol = 1e-2 if dtype in ("float16", "bfloat16") else 1e-6
    values = self.values(got).reshape(want.shape)
    if not self.np.allclose(values, want, rtol=rtol, atol=0):
      raise AssertionError("%s (%s): got %s, want %s" % (what, dtype, values.tolist(),
                                                           want.tolist()))


def _input(np, rank, n=7):
  """Rank r's input: small positive integers, increasing with r, so that min is rank 0's,
  max the last rank's, and sums and products stay exact in every dtype (uint8, float16)."""
  return np.arange(n) % 3 + 1 + rank


def _reduced(np, op, inputs, integer):
  stacked = np.stack(inputs)
  if op == "sum":
    return stacked.sum(axis=0)
  if op == "prod":
    return stacked.prod(axis=0)
  if op == "min":
    return stacked.min(axis=0)
  if op == "max":
    return stacked.max(axis=0)
  total = stacked.sum(axis=0)
  return total // len(inputs) if integer else total / len(inputs)


def rank_collectives(framework, dtypes):
  """Every collective on every dtype: out of place, in place, into an out, non-contiguous
  inputs, 0-d and empty arrays, async. Returns how many collectives ran."""
  import ringsync as rs
  a = Arrays(framework)
  np = a.np
  rs.init()
  rank, size = rs.rank(), rs.size()
  ops = {"sum": rs.Sum, "avg": rs.Average, "min": rs.Min, "max": rs.Max, "prod": rs.Product}
  ran = 0
  for dt in dtypes:
    integer = dt.startswith(("int", "uint"))
    inputs = [_input(np, r) for r in range(size)]
    mine = inputs[rank]

    for op_name in OPS:
      want = _reduced(np, op_name, inputs, integer)
      x = a.make(mine, dt)
      got = rs.allreduce(x, op=ops[op_name])  # automatic name: same order on every rank
      a.expect(got, want, "allreduce %s" % op_name, dt)
      a.expect(x, mine, "allreduce %s leaves its input alone" % op_name, dt)
      y = a.make(mine, dt)
      same = rs.allreduce(y, op=op_name, name="inplace.%s.%s" % (dt, op_name), out=y)
      assert same is y, "allreduce(out=x) returns x"
      a.expect(y, want, "allreduce %s in place" % op_name, dt)
      ran += 2

    total = _reduced(np, "sum", inputs, integer)
    out = a.make(np.zeros((len(mine),), dtype=np.int64), dt)
    assert rs.allreduce(a.make(mine, dt), out=out) is out
    a.expect(out, total, "allreduce into out", dt)
    # A 2-D input keeps its shape; an out of another shape but as many elements is fine.
    grid = a.make(mine[:6].reshape(2, 3), dt)
    a.expect(rs.allreduce(grid), total[:6].reshape(2, 3), "allreduce 2-D", dt)
    flat = a.make(np.zeros(6, dtype=np.int64), dt)
    rs.allreduce(grid, out=flat)
    a.expect(flat, total[:6], "allreduce 2-D into a flat out", dt)
    ran += 3

    # Non-contiguous input: column 0 of an (n, 2) array.
    pairs = a.make(np.stack([mine, np.zeros_like(mine)], axis=1), dt)
    column = pairs[:, 0]
    assert not a.contiguous(column)
    a.expect(rs.allreduce(column), total, "allreduce of a non-contiguous input", dt)
    a.expect(column, mine, "non-contiguous input unchanged", dt)
    try:
      rs.allreduce(column, out=column)
      raise AssertionError("allreduce in place on a non-contiguous array did not raise")
    except ValueError as e:
      assert "contiguous" in str(e), str(e)
    ran += 1

    for root in range(size):
      x = a.make(mine, dt)
      a.expect(rs.broadcast(x, root=root), inputs[root], "broadcast from %d" % root, dt)
      a.expect(x, mine, "broadcast leaves its input alone", dt)
      y = a.make(mine, dt)
      assert rs.broadcast(y, root=root, name="bcast.%s.%d" % (dt, root), out=y) is y
      a.expect(y, inputs[root], "broadcast in place from %d" % root, dt)
      a.expect(rs.broadcast(column, root=root), inputs[root], "broadcast non-contiguous", dt)
      ran += 3

    # allgather: rank order along the first dimension.
    rows = [(np.arange(6).reshape(2, 3) % 4) + r for r in range(size)]
    gathered = np.concatenate(rows)
    a.expect(rs.allgather(a.make(rows[rank], dt)), gathered, "allgather 2-D", dt)
    a.expect(rs.allgather(a.make(np.array(rank + 1), dt)), np.arange(size) + 1,
             "allgather of 0-d arrays", dt)
    target = a.make(np.zeros((2 * size, 3), dtype=np.int64), dt)
    target[2 * rank:2 * rank + 2] = a.make(rows[rank], dt)
    assert rs.allgather(target[2 * rank:2 * rank + 2], out=target) is target
    a.expect(target, gathered, "allgather in place (x is out's own slice)", dt)
    a.expect(rs.allgather(a.make(rows[rank], dt)[:, ::2]), gathered[:, ::2],
             "allgather of a non-contiguous input", dt)
    ran += 4

    # reduce_scatter: block i of every rank's input, reduced, on rank i.
    blocks = [np.stack([inputs[r][:4] + b for b in range(size)]) for r in range(size)]  # (size, 4)
    for op_name in ("sum", "max"):
      want = _reduced(np, op_name, [blk[rank] for blk in blocks], integer)
      got = rs.reduce_scatter(a.make(blocks[rank], dt), op=op_name)
      a.expect(got, want.reshape(1, 4), "reduce_scatter %s" % op_name, dt)
      ran += 1
    out = a.make(np.zeros(4, dtype=np.int64), dt)
    assert rs.reduce_scatter(a.make(blocks[rank], dt), out=out) is out
    a.expect(out, _reduced(np, "sum", [blk[rank] for blk in blocks], integer),
             "reduce_scatter into out", dt)
    try:
      rs.reduce_scatter(a.make(np.zeros(size + 1, dtype=np.int64), dt))
      raise AssertionError("reduce_scatter of an input that does not split did not raise")
    except ValueError as e:
      assert "equal blocks" in str(e), str(e)
    # alltoall: block j of rank i's input is block i of rank j's result.
    sent = [np.arange(2 * size) % 5 + 10 * r for r in range(size)]
    want = np.concatenate([sent[r][2 * rank:2 * rank + 2] for r in range(size)])
    a.expect(rs.alltoall(a.make(sent[rank], dt)), want, "alltoall", dt)
    handle = rs.alltoall_async(a.make(sent[rank], dt), name="a2a.async.%s" % dt)
    a.expect(handle.wait(), want, "alltoall_async", dt)
    x = a.make(sent[rank], dt)
    try:
      rs.alltoall(x, out=x)
      raise AssertionError("alltoall in place did not raise")
    except ValueError as e:
      assert "in place" in str(e), str(e)
    ran += 5

    # Zero elements and 0-d arrays.
    a.expect(rs.allreduce(a.make(np.zeros(0, dtype=np.int64), dt)), np.zeros(0),
             "allreduce of an empty array", dt)
    a.expect(rs.allreduce(a.make(np.array(rank + 1), dt)), np.array(size * (size + 1) // 2),
             "allreduce of a 0-d array", dt)
    ran += 2

    # Async: several in flight, waited in reverse order; inputs need not be kept by the caller.
    handles = [
        rs.allreduce_async(a.make(mine, dt), op="max"),
        rs.broadcast_async(a.make(mine, dt), root=size - 1),
        rs.allgather_async(a.make(rows[rank], dt)),
        rs.barrier_async(),
        rs.allreduce_async(a.make(mine, dt), name="async.%s" % dt),
    ]
    import gc
    gc.collect()
    for _ in range(100000):  # bounded: every rank submits the same collectives
      if all(h.done() for h in handles):
        break
    results = [h.wait() for h in reversed(handles)][::-1]
    a.expect(results[0], inputs[-1], "allreduce_async max", dt)
    a.expect(results[1], inputs[-1], "broadcast_async", dt)
    a.expect(results[2], gathered, "allgather_async", dt)
    assert results[3] is None, "barrier wait() returns None"
    a.expect(results[4], total, "allreduce_async", dt)
    assert handles[4].wait() is results[4], "a second wait() returns the same result"
    assert handles[4].name == "async.%s" % dt
    ran += 5
  rs.barrier()
  rs.shutdown()
  return ran


def rank_async(framework):
  """wait(timeout) and done() on a collective the other rank has not submitted yet; many
  handles in flight; a dropped handle; collectives from two threads at once."""
  import threading
  import ringsync as rs
  a = Arrays(framework)
  np = a.np
  rs.init()
  rank, size = rs.rank(), rs.size()
  assert size == 2
  x = a.make(np.full(4, rank + 1), "float32")
  if rank == 0:
    late = rs.allreduce_async(x, name="late")
    # Rank 1 submits "late" only after the "gate" barrier, which needs this rank: so
    # "late" cannot be complete here, whatever the timing.
    assert not late.done(), "done() before every rank submitted"
    try:
      late.wait(timeout=0.05)
      raise AssertionError("wait(timeout) returned before every rank submitted")
    except TimeoutError as e:
      assert "late" in str(e), str(e)
    assert "pending" in repr(late)
    rs.barrier(name="gate")
    a.expect(late.wait(), np.full(4, 3), "wait() after a timed-out wait()", "float32")
    assert late.done()
  else:
    rs.barrier(name="gate")
    a.expect(rs.allreduce(x, name="late"), np.full(4, 3), "late", "float32")

  # Many in flight, waited in a rank-dependent order.
  handles = [rs.allreduce_async(a.make(np.full(3, i + rank), "int64"), name="many.%d" % i)
             for i in range(32)]
  order = list(range(32)) if rank == 0 else list(reversed(range(32)))
  for i in order:
    a.expect(handles[i].wait(), np.full(3, 2 * i + 1), "many.%d" % i, "int64")

  # A handle dropped without waiting: the collective still runs; later ones are unaffected.
  rs.allreduce_async(a.make(np.ones(5), "float64"), name="dropped")
  a.expect(rs.allreduce(a.make(np.ones(5), "float64"), name="after.dropped"), np.full(5, 2),
           "after a dropped handle", "float64")

  # Two threads at once, each with its own names (the library is thread-safe; waits release
  # the GIL).
  failures = []

  def worker(t):
    try:
      for i in range(20):
        got = rs.allreduce(a.make(np.full(2, t * 100 + i), "int32"), name="thread%d.%d" % (t, i))
        a.expect(got, np.full(2, 2 * (t * 100 + i)), "thread %d" % t, "int32")
    except BaseException as e:  # noqa: B902 - reported by the main thread
      failures.append(repr(e))

  threads = [threading.Thread(target=worker, args=(t,)) for t in range(2)]
  for t in threads:
    t.start()
  for t in threads:
    t.join(120)
  assert not any(t.is_alive() for t in threads), "a thread is still waiting"
  assert not failures, failures
  rs.barrier()
  return "ok"


class CollectivesTest(unittest.TestCase):

  def test_numpy_every_collective_and_dtype_on_three_ranks(self):
    with harness.Daemon() as daemon:
      results = harness.run_ranks(daemon, 3, "test_api:rank_collectives",
                                  args=["numpy", NUMPY_DTYPES], timeout=120)
    harness.check_ranks(results)
    self.assertTrue(all(r.value == results[0].value and r.value > 0 for r in results))

  @unittest.skipUnless(HAVE_TORCH, "torch is not installed")
  def test_torch_every_collective_and_dtype_including_bfloat16(self):
    with harness.Daemon() as daemon:
      results = harness.run_ranks(daemon, 2, "test_api:rank_collectives",
                                  args=["torch", TORCH_DTYPES], timeout=180)
    harness.check_ranks(results)

  def test_async_handles_timeouts_and_threads(self):
    with harness.Daemon() as daemon:
      results = harness.run_ranks(daemon, 2, "test_api:rank_async", args=["numpy"], timeout=120)
    harness.check_ranks(results)


if __name__ == "__main__":
  unittest.main()
