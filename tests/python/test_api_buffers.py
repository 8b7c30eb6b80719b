"""ringsync.empty(): arrays and tensors in the daemon's shared memory.

Zero copy is checked where it shows: the mapping is shared (/proc/self/maps), the daemon's
ringsync_staged_bytes_total does not move for collectives on such buffers (and moves by
exactly the bytes of a plain array's collective), and ringsync_registered_buffer_bytes goes
up on allocation and back down once the array is garbage-collected.
"""

import importlib.util
import os
import unittest

import harness

HAVE_TORCH = importlib.util.find_spec("torch") is not None

STAGED = "ringsync_staged_bytes_total"
REGISTERED = 'ringsync_registered_buffer_bytes{memory="host"}'


def _metric(key):
  import os
  return harness.fetch_metrics(os.environ["RINGSYNC_TEST_METRICS"]).get(key, 0.0)


def _eventually(read, want, what):
  """Polls read() until it returns want (bounded): the daemon applies a buffer's free after
  the client sent it, and /metrics is read on another connection."""
  import time
  got = None
  for _ in range(1000):
    got = read()
    if got == want:
      return
    time.sleep(0.01)
  raise AssertionError("%s: %r, want %r" % (what, got, want))


def _mapping_of(address):
  """The /proc/self/maps line whose range holds address."""
  with open("/proc/self/maps") as maps:
    for line in maps:
      low, high = (int(v, 16) for v in line.split()[0].split("-"))
      if low <= address < high:
        return line.strip()
  return ""


def _is_shared_mapping(address):
  line = _mapping_of(address)
  return len(line.split()) > 1 and line.split()[1].endswith("s"), line


def rank_zero_copy(with_torch):
  import gc
  import numpy as np
  import ringsync as rs
  rs.init()
  rank, size = rs.rank(), rs.size()

  a = rs.empty((1024,), "float32")
  assert isinstance(a, np.ndarray) and a.shape == (1024,) and a.dtype == np.float32
  assert a.flags.c_contiguous and a.flags.writeable
  shared, line = _is_shared_mapping(a.__array_interface__["data"][0])
  assert shared, "rs.empty() memory is not a shared mapping: %s" % line
  assert rs.empty((2, 0), "int64").shape == (2, 0)  # no elements: an ordinary array
  for bad in ("int16", "bfloat16", np.complex64):
    try:
      rs.empty(4, bad)
      raise AssertionError("rs.empty(4, %r) did not raise" % (bad,))
    except TypeError as e:
      assert str(np.dtype(bad)) in str(e) if bad != "bfloat16" else "bfloat16" in str(e), str(e)

  # Collectives whose buffers all lie in shared memory stage nothing.
  rs.barrier("zc.start")
  before = _metric(STAGED) if rank == 0 else 0
  rs.barrier("zc.measured")
  a[:] = rank + 1
  rs.allreduce(a, out=a, name="zc.inplace")
  assert (a == size * (size + 1) / 2).all(), a[:4]
  b = rs.empty((32, 32), "float32")
  assert rs.allreduce(a, out=b, name="zc.outofplace", op=rs.Max) is b
  assert (b == a.max()).all()
  gathered = rs.empty((2 * size, 3), "int64")
  mine = gathered[2 * rank:2 * rank + 2]
  mine[:] = rank
  rs.allgather(mine, out=gathered, name="zc.gather")
  assert (gathered[:, 0] == np.repeat(np.arange(size), 2)).all(), gathered
  c = rs.empty((5,), "uint8")
  c[:] = 7 if rank == size - 1 else 0
  rs.broadcast(c, root=size - 1, out=c, name="zc.bcast")
  assert (c == 7).all()
  view = rs.empty((4, 8), "float64")[1:3]  # a contiguous view inside a shared buffer
  view[:] = 1
  rs.allreduce(view, out=view, name="zc.view")
  assert (view == size).all()
  if with_torch:
    import torch
    t = rs.empty((16, 8), torch.bfloat16, framework="torch")
    assert isinstance(t, torch.Tensor) and t.dtype == torch.bfloat16 and t.shape == (16, 8)
    assert _is_shared_mapping(t.data_ptr())[0]
    t.fill_(rank + 1)
    rs.allreduce(t, out=t, name="zc.torch", op="sum")
    assert bool((t == size * (size + 1) / 2).all()), t
    h = rs.empty(6, "float16", framework="torch")
    h.fill_(rank)
    rs.allreduce_async(h, out=h, name="zc.torch.async", op=rs.Max).wait()
    assert bool((h == size - 1).all())
  rs.barrier("zc.done")
  if rank == 0:
    after = _metric(STAGED)
    assert after == before, "zero-copy collectives staged %d bytes" % (after - before)

  # A plain array's collective stages exactly its bytes, once per rank.
  plain = np.ones(1000, dtype=np.float32)
  rs.barrier("plain.start")
  before = _metric(STAGED) if rank == 0 else 0
  rs.barrier("plain.measured")
  rs.allreduce(plain, out=plain, name="plain")
  rs.barrier("plain.done")
  if rank == 0:
    staged = _metric(STAGED) - before
    assert staged == size * plain.nbytes, "staged %d bytes, want %d" % (staged, size * plain.nbytes)

  # Allocation shows in the daemon, and garbage collection gives the memory back. The other
  # ranks wait in a barrier meanwhile (no allocations of theirs in between).
  rs.barrier("alloc.start")
  if rank == 0:
    base = _metric(REGISTERED)
    big = rs.empty((1 << 20,), "uint8")
    grown = _metric(REGISTERED) - base
    assert grown >= 1 << 20, "registered bytes grew by %d for a 1 MiB buffer" % grown
    row = big.reshape(1024, 1024)[3]  # a view keeps the buffer alive
    del big
    gc.collect()
    assert _metric(REGISTERED) - base == grown, "freed while a view was alive"
    row[:] = 1
    del row
    gc.collect()
    _eventually(lambda: _metric(REGISTERED), base, "registered bytes after the last view died")
  rs.barrier("alloc.done")
  return "ok"


def _check_fork(rs, shared):
  """A forked child does not inherit the connection: it says so, and may init() its own."""
  import traceback
  pid = os.fork()
  if pid == 0:
    code = 1
    try:
      assert not rs.is_initialized()
      try:
        rs.rank()
        raise AssertionError("rank() in a forked child did not raise")
      except rs.RingsyncError as e:
        assert e.status == "NOT_INITIALIZED" and "forked" in e.message, e
      rs.init(job_id="forked.child", local_rank=0, local_size=1)
      rs.barrier()
      assert shared[1, 1] == 1001  # the parent's buffer stays mapped here
      rs.shutdown()
      code = 0
    except BaseException:  # noqa: B902 - reported through the exit status
      traceback.print_exc()
    finally:
      os._exit(code)
  _, status = os.waitpid(pid, 0)
  assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, "forked child failed: %d" % status
  assert rs.is_initialized()


def rank_shutdown_keeps_buffers(with_torch):
  """Arrays from rs.empty() stay valid after shutdown(); init() again works."""
  import numpy as np
  import ringsync as rs
  rs.init()
  a = rs.empty((3, 1000), "float64")
  a[:] = np.arange(3000).reshape(3, 1000)
  tensors = []
  if with_torch:
    import torch
    t = rs.empty(100, "bfloat16", framework="torch")
    t.copy_(torch.arange(100))
    tensors.append(t)
  _check_fork(rs, a)
  # Local size 2, but rank 1 never comes: pending until shutdown().
  pending = rs.allreduce_async(np.ones(3), name="never.finished")
  rs.shutdown()
  assert not rs.is_initialized()
  try:
    pending.wait(timeout=30)
    raise AssertionError("a collective pending at shutdown() succeeded")
  except rs.RingsyncError as e:
    assert e.status == "CLOSED", e
  assert (a == np.arange(3000).reshape(3, 1000)).all(), "contents lost at shutdown()"
  a[0, 0] = -1  # still writable
  assert a[0, 0] == -1
  for t in tensors:
    assert t.float().sum().item() == sum(range(100))
  try:
    rs.rank()
    raise AssertionError("rank() after shutdown() did not raise")
  except rs.RingsyncError as e:
    assert e.status == "NOT_INITIALIZED", e
  rs.shutdown()  # twice is fine

  rs.init(local_rank=0, local_size=1, job_id="second")  # explicit arguments win over the env
  assert (rs.rank(), rs.size(), rs.local_size()) == (0, 1, 1)
  assert (rs.allreduce(a) == a).all()  # now ordinary memory: staged
  b = rs.empty(10, "int32")
  b[:] = 4
  rs.allreduce(b, out=b)
  assert (b == 4).all()
  del a, tensors
  import gc
  gc.collect()
  rs.shutdown()
  return "ok"


class BuffersTest(unittest.TestCase):

  def test_zero_copy_buffers_are_shared_and_stage_nothing(self):
    with harness.Daemon() as daemon:
      results = harness.run_ranks(daemon, 2, "test_api_buffers:rank_zero_copy",
                                  args=[HAVE_TORCH], timeout=120)
    harness.check_ranks(results)

  def test_buffers_survive_shutdown_and_init_again(self):
    with harness.Daemon() as daemon:
      results = harness.run_ranks(daemon, 1, "test_api_buffers:rank_shutdown_keeps_buffers",
                                  args=[HAVE_TORCH], timeout=120,
                                  env={"RINGSYNC_LOCAL_SIZE": "2"})
    harness.check_ranks(results)


if __name__ == "__main__":
  unittest.main()
