"""The "ringsync" backend's failures: the daemon's errors come out of work.wait(), and what the
backend does not do is refused up front with a RuntimeError naming it.

One daemon, 2 ranks started as torchrun would start them (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT beside the RINGSYNC_* variables), so init_process_group("ringsync") runs on the
env:// rendezvous without the launcher.
"""

import os
import socket
import time
import unittest

import harness
from test_torch_backend import backend_missing

try:
  import torch
except ImportError:  # the test skips itself
  torch = None


def _raises(function, *needles):
  """Calls function(); returns the RuntimeError it raised, which must contain every needle."""
  try:
    function()
  except RuntimeError as e:
    text = str(e)
    for needle in needles:
      assert needle in text, "%r not in %r" % (needle, text)
    return e
  raise AssertionError("no RuntimeError (expected one mentioning %s)" % (needles,))


def errors_rank():
  import ringsync
  import ringsync.torch
  import torch.distributed as dist
  ringsync.torch.register()  # again: idempotent
  dist.init_process_group("ringsync")
  rank = dist.get_rank()
  assert dist.get_world_size() == 2 and rank == ringsync.rank()
  ok = torch.ones(3)

  # The daemon's mismatch, from wait(): the ranks disagree on the count...
  work = dist.all_reduce(torch.ones(4 + rank), async_op=True)
  _raises(work.wait, "ringsync allreduce", "mismatch", "count")
  assert work.is_completed() and not work.is_success()
  # ... and, the same way, from the collective's future (DDP's comm hooks wait on it).
  work = dist.all_reduce(torch.ones(4, dtype=torch.float32 if rank else torch.float64),
                         async_op=True)
  _raises(work.get_future().wait, "mismatch", "dtype")
  # Ranks calling different collectives at the same place: a mismatch, not a hang.
  if rank == 0:
    work = dist.all_reduce(ok.clone(), async_op=True)
  else:
    work = dist.broadcast(ok.clone(), src=0, async_op=True)
  _raises(work.wait, "mismatch", "collective")
  # A synchronous call raises at once.
  _raises(lambda: dist.all_reduce(torch.ones(2 + rank)), "mismatch")
  # The group carries on after all that.
  t = torch.full((3,), float(rank + 1))
  dist.all_reduce(t)
  assert t.tolist() == [3.0, 3.0, 3.0], t

  # Refused before anything is sent, naming the call and what is wrong.
  # (On every rank: a rank that raised submitted nothing the others would wait for.)
  _raises(lambda: dist.reduce(ok, dst=0, op=dist.ReduceOp.BAND), "ringsync reduce", "BAND")
  _raises(lambda: dist.gather(ok, None, dst=2), "ringsync gather", "root rank 2 is not a rank")
  _raises(lambda: dist.scatter(ok, None, src=7), "ringsync scatter", "root rank 7 is not a rank")
  _raises(lambda: dist.send(ok, dst=1 - rank), "ringsync send", "not supported")
  _raises(lambda: dist.recv(ok, src=1 - rank), "ringsync recv", "not supported")
  _raises(lambda: dist.all_reduce(ok, op=dist.ReduceOp.BAND), "ringsync allreduce", "BAND",
          "SUM, AVG, PRODUCT, MIN and MAX")
  _raises(lambda: dist.all_reduce(torch.ones(2, dtype=torch.int16)), "ringsync allreduce",
          "int16", "float32")
  _raises(lambda: dist.all_reduce(torch.ones(2, dtype=torch.bool)), "ringsync allreduce",
          "bool", "MIN or MAX")
  _raises(lambda: dist.all_to_all([ok.clone()], [ok.clone()]), "ringsync alltoall",
          "one input and one output tensor per rank (2), got 1 and 1")
  _raises(lambda: dist.all_reduce(ok.to_sparse()), "ringsync allreduce", "Sparse")
  # None of those reached the daemon: the next collective still pairs up.
  t = torch.full((2,), float(rank))
  dist.all_reduce(t, op=dist.ReduceOp.MAX)
  assert t.tolist() == [1.0, 1.0], t

  # A subgroup: the daemons know only the whole job (the last use of new_group here: rank 1
  # does not call it, so no rank waits for the other in its store barrier).
  if rank == 0:
    _raises(lambda: dist.new_group([0], backend="ringsync"), "every rank", "gloo")

  # Peer lost: rank 1 leaves while rank 0 waits for it. The core API's barrier (its own names)
  # makes sure rank 0 submitted first.
  if rank == 0:
    work = dist.all_reduce(ok.clone(), async_op=True)
    ringsync.barrier(name="leaving")
    _raises(work.wait, "ringsync allreduce", "peer lost", "local rank 1")
  else:
    ringsync.barrier(name="leaving")
    os._exit(0)  # no shutdown: the daemon sees the connection drop
  return "ok"


def lifecycle_rank():
  """Two groups side by side; destroy_process_group() releases the connection; a default group
  again; close() finishes what is pending and refuses what comes after."""
  import warnings

  import ringsync
  import ringsync.torch  # noqa: F401
  import torch.distributed as dist
  from ringsync.torch import distributed as rsd
  dist.init_process_group("ringsync")
  t = torch.ones(2)
  dist.all_reduce(t)
  assert t.tolist() == [2.0, 2.0]
  # A second group over all ranks: its collectives have names of their own, so the two
  # groups' calls may interleave.
  other = dist.new_group(backend="ringsync")
  a, b = torch.ones(2), torch.full((3,), float(dist.get_rank()))
  work_a = dist.all_reduce(a, async_op=True)
  work_b = dist.all_reduce(b, op=dist.ReduceOp.MAX, group=other, async_op=True)
  work_b.wait()
  work_a.wait()
  assert a.tolist() == [2.0, 2.0] and b.tolist() == [1.0, 1.0, 1.0], (a, b)
  dist.destroy_process_group()
  del other, work_b  # torch let go of the groups; the last references go here
  assert ringsync.is_initialized()  # the connection is ringsync's, not the group's
  # A second default group on the same connection (torch gives it the same name: the
  # collectives' names repeat, as they may). On a store of its own: torch's env:// store at
  # the same port may still be rank 0's old one when rank 1 comes back to it.
  dist.init_process_group("ringsync", init_method="tcp://127.0.0.1:%s"
                          % os.environ["TEST_SECOND_PORT"], rank=int(os.environ["RANK"]),
                          world_size=2)
  t = torch.ones(2)
  dist.all_reduce(t)
  assert t.tolist() == [2.0, 2.0]
  # A Work completes by itself, never waited for: the group's thread drives it.
  work = dist.all_reduce(torch.ones(5), async_op=True)
  while not work.is_completed():  # the rank's own deadline catches a hang
    time.sleep(0.001)
  assert work.is_success() and work.result()[0].tolist() == [2.0] * 5
  # close(): pending collectives finish, later ones are refused.
  work = dist.all_reduce(torch.ones(3), async_op=True)
  assert rsd.close(dist.group.WORLD, 30) == 0
  assert work.is_completed() and work.wait()
  _raises(lambda: dist.all_reduce(torch.ones(1)), "process group is closed")
  dist.destroy_process_group()
  # No group holds the connection any more: shutdown() does not wait for one (it would warn).
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    ringsync.shutdown()
  assert not caught, [str(w.message) for w in caught]
  return "ok"


def _free_port():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _torch_env(port, size):
  return lambda rank: {"RANK": str(rank), "WORLD_SIZE": str(size), "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": str(port), "LOCAL_RANK": str(rank)}


@unittest.skipIf(backend_missing(), backend_missing())
class TorchBackendErrorsTest(unittest.TestCase):
  def test_daemon_errors_come_out_of_wait_and_unsupported_calls_are_named(self):
    with harness.Daemon() as daemon:
      results = harness.run_ranks(daemon, 2, "test_torch_backend_errors:errors_rank",
                                  rank_env=_torch_env(_free_port(), 2), timeout=90)
      self.assertTrue(results[0].ok, results[0].describe())
      self.assertEqual(results[0].value, "ok")
      self.assertEqual(results[1].returncode, 0, results[1].describe())

  def test_destroy_close_and_a_second_group(self):
    with harness.Daemon() as daemon:
      results = harness.run_ranks(daemon, 2, "test_torch_backend_errors:lifecycle_rank",
                                  rank_env=_torch_env(_free_port(), 2), timeout=90,
                                  env={"TEST_SECOND_PORT": str(_free_port())})
      harness.check_ranks(results)
      self.assertEqual([r.value for r in results], ["ok", "ok"])

  def test_ranks_that_disagree_with_the_job_are_refused(self):
    """torch's RANK swapped against ringsync's: a clear error, not crossed collectives."""
    with harness.Daemon() as daemon:
      swap = _torch_env(_free_port(), 2)
      results = harness.run_ranks(daemon, 2, "test_torch_backend_errors:swapped_rank",
                                  rank_env=lambda r: swap(1 - r), timeout=90)
      harness.check_ranks(results)
      for r in results:
        self.assertIn("torch says rank %d of 2 but the ringsync job says rank %d of 2"
                      % (1 - r.rank, r.rank), r.value)


def swapped_rank():
  import ringsync.torch  # noqa: F401
  import torch.distributed as dist
  try:
    dist.init_process_group("ringsync")
  except RuntimeError as e:
    return str(e)
  return "no error"


if __name__ == "__main__":
  unittest.main()
