"""The core API across nodes: 2 nodes x 2 slots under `ringsync launch` (two daemons on this
machine). Ranks are global: broadcast roots and allgather order span the nodes."""

import importlib.util
import os
import unittest

import harness

HAVE_TORCH = importlib.util.find_spec("torch") is not None


def rank_across_nodes(with_torch):
  import numpy as np
  import ringsync as rs
  rs.init()  # everything from the launcher's environment
  env = os.environ
  rank, size = rs.rank(), rs.size()
  assert (rank, size) == (int(env["RINGSYNC_RANK"]), int(env["RINGSYNC_SIZE"])), (rank, size)
  assert rs.local_rank() == int(env["RINGSYNC_LOCAL_RANK"])
  assert rs.local_size() == int(env["RINGSYNC_LOCAL_SIZE"]) == 2
  assert rs.node_rank() == int(env["RINGSYNC_NODE_RANK"])
  assert rs.num_nodes() == 2 and size == 4
  assert rank == rs.node_rank() * rs.local_size() + rs.local_rank()

  assert (rs.allreduce(np.full(5, rank + 1.0)) == 10).all()
  assert (rs.allreduce(np.full(3, rank, np.int32), op="min") == 0).all()
  assert (rs.allreduce(np.full(3, rank, np.int64), op=rs.Max) == 3).all()
  assert np.allclose(rs.allreduce(np.full(2, rank, np.float32), op=rs.Average), 1.5)
  gathered = rs.allgather(np.array([[rank, 10 * rank]], np.int64))
  assert gathered.tolist() == [[r, 10 * r] for r in range(size)], gathered
  for root in range(size):  # roots on both nodes
    got = rs.broadcast(np.arange(4.0) * (rank + 1), root=root, name="bcast.%d" % root)
    assert (got == np.arange(4.0) * (root + 1)).all(), (root, got)

  # Reduce-scatter and alltoall: blocks by global rank, across the nodes.
  blocks = np.arange(4 * 3, dtype=np.float64).reshape(4, 3) + rank  # block i for rank i
  got = rs.reduce_scatter(blocks, name="rs.across")
  assert (got == (np.arange(3) + 3 * rank) * size + 6).all(), (rank, got)
  assert (rs.reduce_scatter(np.full(8, rank, np.int32), op="max") == 3).all()
  sent = np.array([100 * rank + j for j in range(size)], np.int64)  # block j for rank j
  assert rs.alltoall(sent, name="a2a.across").tolist() == [100 * r + rank for r in range(size)]

  # Async, waited in a rank-dependent order.
  handles = [rs.allreduce_async(np.full(8, i, np.float64), name="async.%d" % i) for i in range(8)]
  for i in (range(8) if rank % 2 else reversed(range(8))):
    assert (handles[i].wait() == 4 * i).all()

  # Zero copy on each node.
  shared = rs.empty((64,), "float32")
  shared[:] = rank
  rs.allreduce(shared, out=shared, name="shared")
  assert (shared == 6).all()

  # The barrier spans the nodes: rank 3 (node 1) writes a mark before it, everyone sees it after.
  mark = os.path.join(env[harness.RESULT_DIR_ENV], "before-barrier")
  if rank == 3:
    with open(mark, "w") as f:
      f.write("3")
  rs.barrier(name="across")
  assert os.path.exists(mark), "rank %d passed the barrier before rank 3 entered it" % rank

  if with_torch:
    import torch
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
      t = torch.full((33,), float(rank + 1), dtype=dtype)
      rs.allreduce(t, out=t, name="torch.%s" % dtype)
      assert bool((t == 10).all()), (dtype, t)
    g = rs.allgather(torch.full((2,), rank, dtype=torch.bfloat16))
    assert g.tolist() == [0, 0, 1, 1, 2, 2, 3, 3], g
    s = rs.reduce_scatter(torch.ones((4, 2), dtype=torch.bfloat16) * (rank + 1))
    assert s.tolist() == [[10, 10]], s
    a = rs.alltoall(torch.arange(4, dtype=torch.float16) + 10 * rank)
    assert a.tolist() == [10 * r + rank for r in range(size)], a
  rs.shutdown()
  return {"rank": rank, "node": int(env["RINGSYNC_NODE_RANK"])}


class LaunchTest(unittest.TestCase):

  def test_two_nodes_two_slots(self):
    outcome = harness.launch("test_api_launch:rank_across_nodes", nodes=2, slots=2,
                             args=[HAVE_TORCH], job_id="pyapi", timeout=120)
    outcome.check()
    self.assertEqual(outcome.values, {r: {"rank": r, "node": r // 2} for r in range(4)})


if __name__ == "__main__":
  unittest.main()
