"""reduce, gather and scatter (ringsync._rooted) against a real ringsyncd: every root, dtypes
and ops, numpy and torch, in and out of place, async, and the errors a caller can make.

Each rank checks its own results: every rank knows every rank's input.
"""

import importlib.util
import unittest

import harness
from test_api import Arrays, _input, _reduced

HAVE_TORCH = importlib.util.find_spec("torch") is not None
OPS = ["sum", "avg", "min", "max", "prod"]


def rank_rooted(framework, dtypes):
  """Every root: reduce with every op, gather, scatter; in place on root, into an out, async.
  Returns how many collectives ran."""
  import ringsync as rs
  a = Arrays(framework)
  np = a.np
  rs.init()
  rank, size = rs.rank(), rs.size()
  ran = 0
  for dt in dtypes:
    integer = dt.startswith(("int", "uint"))
    inputs = [_input(np, r) for r in range(size)]
    mine = inputs[rank]
    for root in range(size):
      for op_name in OPS:
        x = a.make(mine, dt)
        got = rs.reduce(x, op=op_name, root=root)
        if rank == root:
          a.expect(got, _reduced(np, op_name, inputs, integer), "reduce %s to %d" % (op_name, root), dt)
        else:
          assert got is None, "reduce: a non-root gets None, not %r" % (got,)
        a.expect(x, mine, "reduce leaves its input alone", dt)
        ran += 1
      # In place on root: out=x is the result there, and only there.
      y = a.make(mine, dt)
      got = rs.reduce(y, root=root, out=y, name="reduce.inplace.%s.%d" % (dt, root))
      if rank == root:
        assert got is y, "reduce(out=x) returns x on root"
        a.expect(y, _reduced(np, "sum", inputs, integer), "reduce in place", dt)
      else:
        assert got is None
        a.expect(y, mine, "a non-root's out=x is not written", dt)

      # gather: rank order along the first dimension, on root alone.
      rows = [(np.arange(6).reshape(2, 3) % 4) + r for r in range(size)]
      got = rs.gather(a.make(rows[rank], dt), root=root)
      if rank == root:
        a.expect(got, np.concatenate(rows), "gather to %d" % root, dt)
      else:
        assert got is None
      out = a.make(np.zeros((2 * size, 3), dtype=np.int64), dt)
      got = rs.gather(a.make(rows[rank], dt), root=root, out=out)
      if rank == root:
        assert got is out
        a.expect(out, np.concatenate(rows), "gather into out", dt)
      else:
        a.expect(out, np.zeros((2 * size, 3)), "a non-root's out is not written", dt)

      # scatter: block i of root's input on rank i; the others' values are not read.
      blocks = np.arange(3 * size) % 7 + 10 * root
      x = a.make(blocks if rank == root else np.zeros(3 * size, dtype=np.int64), dt)
      a.expect(rs.scatter(x, root=root), blocks[3 * rank:3 * rank + 3], "scatter from %d" % root, dt)
      a.expect(x, blocks if rank == root else np.zeros(3 * size), "scatter leaves its input alone", dt)
      grid = a.make((np.arange(4 * size).reshape(2 * size, 2) + root) if rank == root
                    else np.zeros((2 * size, 2), dtype=np.int64), dt)
      want = (np.arange(4 * size).reshape(2 * size, 2) + root)[2 * rank:2 * rank + 2]
      a.expect(rs.scatter(grid, root=root), want, "scatter of a 2-D input", dt)
      ran += 6

    # Async, several in flight, waited in reverse order.
    handles = [rs.reduce_async(a.make(mine, dt), op="max", root=size - 1),
               rs.gather_async(a.make(mine, dt), root=0),
               rs.scatter_async(a.make(np.arange(2 * size), dt), root=size - 1)]
    results = [h.wait() for h in reversed(handles)][::-1]
    if rank == size - 1:
      a.expect(results[0], inputs[-1], "reduce_async max", dt)
    else:
      assert results[0] is None
    if rank == 0:
      a.expect(results[1], np.concatenate(inputs), "gather_async", dt)
    else:
      assert results[1] is None
    a.expect(results[2], np.arange(2 * size)[2 * rank:2 * rank + 2], "scatter_async", dt)
    ran += 3
  rs.barrier()
  rs.shutdown()
  return ran


def rank_rooted_errors():
  """Bad roots, bad types, inputs that do not split, scatter into its own input: each raises at
  once with words that say what to fix, and the job goes on."""
  import numpy as np
  import ringsync as rs
  rs.init()
  size = rs.size()
  x = np.arange(2 * size, dtype=np.float32)
  for call in (rs.reduce, rs.gather, rs.scatter):
    for root, error, words in ((size, ValueError, "not a rank"), (-1, ValueError, "not a rank"),
                               (True, TypeError, "int"), ("0", TypeError, "int")):
      try:
        call(x, root=root)
        raise AssertionError("%s(root=%r) did not raise" % (call.__name__, root))
      except error as e:
        assert words in str(e), str(e)
  try:
    rs.scatter(np.arange(2 * size + 1, dtype=np.float32), root=0)
    raise AssertionError("scatter of an input that does not split did not raise")
  except ValueError as e:
    assert "equal blocks" in str(e), str(e)
  for call in (rs.gather, rs.scatter):
    try:
      call(x, root=0, out=x)
      raise AssertionError("%s(out=x) did not raise" % call.__name__)
    except ValueError as e:
      assert "its own input" in str(e), str(e)
  # The job goes on.
  assert rs.allreduce(np.ones(3, dtype=np.float32))[0] == size
  rs.shutdown()
  return "ok"


class RootedTest(unittest.TestCase):

  def test_numpy_every_root_dtype_and_op_on_three_ranks(self):
    with harness.Daemon() as daemon:
      results = harness.run_ranks(daemon, 3, "test_api_rooted:rank_rooted",
                                  args=["numpy", ["float32", "int64", "float16", "uint8"]], timeout=120)
    harness.check_ranks(results)
    self.assertTrue(all(r.value == results[0].value and r.value > 0 for r in results))

  @unittest.skipUnless(HAVE_TORCH, "torch is not installed")
  def test_torch_tensors_including_bfloat16(self):
    with harness.Daemon() as daemon:
      results = harness.run_ranks(daemon, 2, "test_api_rooted:rank_rooted",
                                  args=["torch", ["float32", "bfloat16", "int32"]], timeout=180)
    harness.check_ranks(results)

  def test_bad_roots_and_shapes_raise_and_the_job_goes_on(self):
    with harness.Daemon() as daemon:
      results = harness.run_ranks(daemon, 2, "test_api_rooted:rank_rooted_errors", timeout=120)
    harness.check_ranks(results)


if __name__ == "__main__":
  unittest.main()
