"""Every collective of torch.distributed's "ringsync" backend gives gloo's results.

2 nodes x 2 slots under `ringsync launch` (so the daemons' paths between nodes run too). Each
rank calls init_process_group("ringsync") with nothing but the launcher's environment, opens a
gloo group beside it (dist.new_group(backend="gloo")), and runs every collective for every
dtype, reduce op and size (0, 1, 7, 1000 elements) on both, comparing the results on the rank
(gather and scatter against the inputs every rank knows).
The inputs are small integers, so every reduction is exact in every dtype and the results
must be equal, not close.

all_to_all_single and all_to_all also run with blocks of different sizes, some empty.

Where gloo lacks a call (_all_gather_base, reduce_scatter, list all_to_all, AVG) or a dtype
(bfloat16, bool, int16, complex), the reference is what gloo computes for the same data in
another form: all_gather then cat, all_reduce then this rank's block, SUM then division,
float64 for bfloat16, the bytes for the data-moving calls.
"""

import unittest

import harness
from test_torch_backend import backend_missing

try:
  import torch
except ImportError:  # the test skips itself
  torch = None

NODES, SLOTS = 2, 2
SIZES = (0, 1, 7, 1000)


def _dtypes():
  reduced = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32,
             torch.int64, torch.uint8]
  moved = reduced + [torch.bool, torch.int8, torch.int16, torch.complex64]
  return reduced, moved


def _ops():
  import torch.distributed as dist
  return {"SUM": dist.ReduceOp.SUM, "AVG": dist.ReduceOp.AVG,
          "PRODUCT": dist.ReduceOp.PRODUCT, "MIN": dist.ReduceOp.MIN, "MAX": dist.ReduceOp.MAX}


def data(seed, n, dtype):
  """n small integers (1..3, or a bool pattern) that depend on seed: exact sums and products
  of 4 ranks in every dtype (3**4 = 81 fits uint8 and bfloat16's 8-bit mantissa)."""
  values = (torch.arange(n) * (seed + 1) + seed) % 3 + 1
  if dtype == torch.bool:
    return values == 2
  return values.to(dtype)


GLOO_REDUCES = None  # dtypes gloo reduces natively (set in the rank)


def gloo_allreduce(t, op_name, group, size):
  """all_reduce on gloo of t's values, exact: in t's dtype where gloo reduces it, else in
  float64; AVG as SUM then division (truncating for integers, as ringsync does)."""
  import torch.distributed as dist
  carrier = t if t.dtype in GLOO_REDUCES else t.to(torch.float64)
  carrier = carrier.clone()
  op = dist.ReduceOp.SUM if op_name == "AVG" else _ops()[op_name]
  dist.all_reduce(carrier, op=op, group=group)
  if op_name == "AVG":
    if t.dtype.is_floating_point:
      carrier = carrier / size
    else:
      carrier = torch.div(carrier, size, rounding_mode="trunc")
  return carrier.to(t.dtype)


def as_bytes(t):
  """t's memory as uint8 (the data-moving calls' reference on gloo for any dtype)."""
  if t.dtype == torch.bool:
    return t.to(torch.uint8)
  return t.contiguous().view(torch.uint8) if t.numel() else torch.empty(0, dtype=torch.uint8)


def from_bytes(b, dtype, shape):
  if dtype == torch.bool:
    return (b != 0).reshape(shape)
  if b.numel() == 0:
    return torch.empty(shape, dtype=dtype)
  return b.view(dtype).reshape(shape)


class Cases:
  """The collectives: each case runs on the ringsync group and computes gloo's reference."""

  def __init__(self, rs_group, gloo_group, rank, size):
    self.rs, self.gloo, self.rank, self.size = rs_group, gloo_group, rank, size
    self.failures = []
    self.count = 0

  def check(self, what, got, expected):
    self.count += 1
    if got.dtype != expected.dtype or got.shape != expected.shape or not torch.equal(got,
                                                                                    expected):
      self.failures.append("%s: got %s, expected %s" % (what, got.flatten()[:8].tolist(),
                                                        expected.flatten()[:8].tolist()))

  # -- reductions --------------------------------------------------------------------------

  def all_reduce(self, dtype, op, n):
    import torch.distributed as dist
    t = data(self.rank, n, dtype)
    expected = gloo_allreduce(t, op, self.gloo, self.size)
    work = dist.all_reduce(t, op=_ops()[op], group=self.rs, async_op=True)
    assert work.wait() is True
    assert work.is_completed() and work.is_success()
    self.check("all_reduce %s %s n=%d" % (dtype, op, n), t, expected)
    # The future carries the same tensor, as DDP's comm hooks read it.
    self.check("all_reduce future %s %s n=%d" % (dtype, op, n),
               work.get_future().wait()[0], expected)

  def all_reduce_noncontiguous(self, dtype, op, n):
    import torch.distributed as dist
    t = data(self.rank, 2 * n, dtype).reshape(2, n).t()  # a transposed view
    expected = gloo_allreduce(t.contiguous(), op, self.gloo, self.size)
    dist.all_reduce(t, op=_ops()[op], group=self.rs)
    self.check("all_reduce non-contiguous %s %s n=%d" % (dtype, op, n), t.contiguous(),
               expected)

  def all_reduce_coalesced(self, dtype, op, n):
    import torch.distributed as dist
    ts = [data(self.rank, n, dtype), data(self.rank + 5, n + 3, dtype)]
    expected = [gloo_allreduce(t, op, self.gloo, self.size) for t in ts]
    dist.all_reduce_coalesced(ts, op=_ops()[op], group=self.rs)
    for i, (t, e) in enumerate(zip(ts, expected)):
      self.check("all_reduce_coalesced[%d] %s %s n=%d" % (i, dtype, op, n), t, e)

  def reduce_scatter(self, dtype, op, n):
    import torch.distributed as dist
    blocks = [data(self.rank * self.size + j, n, dtype) for j in range(self.size)]
    whole = gloo_allreduce(torch.cat(blocks), op, self.gloo, self.size)
    expected = whole[self.rank * n:(self.rank + 1) * n]
    out = torch.full((n,), 9, dtype=dtype)
    dist.reduce_scatter(out, blocks, op=_ops()[op], group=self.rs)
    self.check("reduce_scatter %s %s n=%d" % (dtype, op, n), out, expected)
    out = torch.empty(n, dtype=dtype)
    dist._reduce_scatter_base(out, torch.cat(blocks), op=_ops()[op], group=self.rs)
    self.check("_reduce_scatter_base %s %s n=%d" % (dtype, op, n), out, expected)

  def reduce(self, dtype, op, n):
    """The root's tensor holds gloo's all_reduce of the inputs; the others' stay as they were."""
    import torch.distributed as dist
    root = n % self.size
    t = data(self.rank + 5, n, dtype)
    mine = t.clone()
    expected = gloo_allreduce(t, op, self.gloo, self.size)
    dist.reduce(t, dst=root, op=_ops()[op], group=self.rs)
    self.check("reduce %s %s n=%d to %d" % (dtype, op, n, root), t, expected if self.rank == root else mine)

  # -- data movement -----------------------------------------------------------------------

  def gather(self, dtype, n):
    """Every rank's tensor in the root's list, in rank order; every rank knows every input."""
    import torch.distributed as dist
    root = (n + 1) % self.size
    t = data(self.rank, n, dtype)
    outs = [torch.empty_like(t) for _ in range(self.size)] if self.rank == root else None
    dist.gather(t, gather_list=outs, dst=root, group=self.rs)
    if self.rank == root:
      self.check("gather %s n=%d to %d" % (dtype, n, root), torch.cat(outs),
                 torch.cat([data(r, n, dtype) for r in range(self.size)]))
    else:
      self.check("gather %s n=%d: the input unchanged" % (dtype, n), t, data(self.rank, n, dtype))

  def scatter(self, dtype, n):
    """Block r of the root's list on rank r."""
    import torch.distributed as dist
    root = (n + 2) % self.size
    out = torch.empty(n, dtype=dtype)
    blocks = [data(10 * r + root, n, dtype) for r in range(self.size)] if self.rank == root else None
    dist.scatter(out, scatter_list=blocks, src=root, group=self.rs)
    self.check("scatter %s n=%d from %d" % (dtype, n, root), out, data(10 * self.rank + root, n, dtype))

  def broadcast(self, dtype, n):
    import torch.distributed as dist
    root = self.size - 1  # not rank 0: the root really is the one given
    t = data(self.rank, n, dtype)
    carrier = as_bytes(t).clone()
    if n:  # as for all_gather
      dist.broadcast(carrier, src=root, group=self.gloo)
    dist.broadcast(t, src=root, group=self.rs)
    self.check("broadcast %s n=%d" % (dtype, n), t, from_bytes(carrier, dtype, t.shape))

  def all_gather(self, dtype, n):
    import torch.distributed as dist
    t = data(self.rank, n, dtype)
    carriers = [torch.empty_like(as_bytes(t)) for _ in range(self.size)]
    if n:  # gloo's all_gather of empty tensors dies of a division by zero (torch 1.13)
      dist.all_gather(carriers, as_bytes(t), group=self.gloo)
    expected = [from_bytes(c, dtype, t.shape) for c in carriers]
    outs = [torch.empty_like(t) for _ in range(self.size)]
    dist.all_gather(outs, t, group=self.rs)
    for r in range(self.size):
      self.check("all_gather[%d] %s n=%d" % (r, dtype, n), outs[r], expected[r])
    flat = torch.empty(self.size * n, dtype=dtype)
    dist._all_gather_base(flat, t, group=self.rs)
    self.check("_all_gather_base %s n=%d" % (dtype, n), flat, torch.cat(expected))

  def all_to_all(self, dtype, n):
    import torch.distributed as dist
    t = data(self.rank * 11, self.size * n, dtype)
    sent = as_bytes(t)
    carrier = torch.empty_like(sent)
    if n:  # as for all_gather
      dist.all_to_all_single(carrier, sent, group=self.gloo)
    expected = from_bytes(carrier, dtype, t.shape)
    out = torch.empty_like(t)
    dist.all_to_all_single(out, t, group=self.rs)
    self.check("all_to_all_single %s n=%d" % (dtype, n), out, expected)
    outs = [torch.empty(n, dtype=dtype) for _ in range(self.size)]
    dist.all_to_all(outs, list(t.split(n)) if n else [t[:0]] * self.size, group=self.rs)
    self.check("all_to_all %s n=%d" % (dtype, n), torch.cat(outs), expected)

  def all_to_all_uneven(self, dtype, n):
    """Blocks of different sizes, some empty: rank r sends (r + j + n) % 3 rows of 2 to j."""
    import torch.distributed as dist
    rows = lambda src, dst: (src + dst + n) % 3  # noqa: E731
    send_splits = [rows(self.rank, j) for j in range(self.size)]
    recv_splits = [rows(j, self.rank) for j in range(self.size)]
    t = data(self.rank * 7 + n, 2 * sum(send_splits), dtype).reshape(-1, 2)
    sent = as_bytes(t).reshape(t.shape[0], -1)
    carrier = torch.empty(sum(recv_splits), sent.shape[1], dtype=torch.uint8)
    dist.all_to_all_single(carrier, sent, recv_splits, send_splits, group=self.gloo)
    expected = from_bytes(carrier, dtype, (sum(recv_splits), 2))
    out = torch.empty(sum(recv_splits), 2, dtype=dtype)
    dist.all_to_all_single(out, t, recv_splits, send_splits, group=self.rs)
    self.check("all_to_all_single uneven %s n=%d" % (dtype, n), out, expected)
    outs = [torch.empty(2 * r, dtype=dtype) for r in recv_splits]
    dist.all_to_all(outs, list(t.reshape(-1).split([2 * s for s in send_splits])),
                    group=self.rs)
    self.check("all_to_all uneven %s n=%d" % (dtype, n), torch.cat(outs).reshape(-1, 2),
               expected)


def collectives_rank():
  """A rank: every case on ringsync and gloo; returns {'count': cases, 'failures': [...]}."""
  import torch.distributed as dist
  import ringsync.torch  # noqa: F401  (registers the backend)
  global GLOO_REDUCES
  GLOO_REDUCES = {torch.float32, torch.float64, torch.float16, torch.int32, torch.int64,
                  torch.uint8}
  dist.init_process_group("ringsync")  # the launcher's RANK, WORLD_SIZE, MASTER_ADDR, ...
  assert dist.get_backend() == "ringsync", dist.get_backend()
  rank, size = dist.get_rank(), dist.get_world_size()
  gloo = dist.new_group(backend="gloo")
  cases = Cases(dist.group.WORLD, gloo, rank, size)
  reduced, moved = _dtypes()
  for n in SIZES:
    for dtype in reduced:
      for op in _ops():
        cases.all_reduce(dtype, op, n)
        cases.reduce_scatter(dtype, op, n)
        cases.reduce(dtype, op, n)
      cases.all_reduce_noncontiguous(dtype, "SUM", n)
      cases.all_reduce_coalesced(dtype, "MAX", n)
    for op in ("MIN", "MAX"):  # bool: MIN is "all", MAX is "any"
      cases.all_reduce(torch.bool, op, n)
    for dtype in moved:
      cases.broadcast(dtype, n)
      cases.all_gather(dtype, n)
      cases.all_to_all(dtype, n)
      cases.all_to_all_uneven(dtype, n)
      cases.gather(dtype, n)
      cases.scatter(dtype, n)
  dist.barrier()
  from ringsync.torch import distributed as rsd
  submitted = rsd.submitted(dist.group.WORLD)
  dist.destroy_process_group()
  return {"count": cases.count, "failures": cases.failures, "submitted": submitted}


@unittest.skipIf(backend_missing(), backend_missing())
class TorchBackendCollectivesTest(unittest.TestCase):
  @classmethod
  def setUpClass(cls):
    outcome = harness.launch("test_torch_backend_collectives:collectives_rank", nodes=NODES,
                             slots=SLOTS, timeout=150)
    outcome.check()
    cls.values = outcome.values

  def test_every_collective_dtype_and_op_equals_gloo(self):
    for rank in range(NODES * SLOTS):
      value = self.values[rank]
      self.assertEqual(value["failures"], [], "rank %d" % rank)
      # 4 sizes x (7 dtypes x (5 ops x 5 checks + 1 + 2) + 2 bool + 11 dtypes x 12): the
      # loops ran in full on every rank.
      self.assertEqual(value["count"], len(SIZES) * (7 * (5 * 5 + 1 + 2) + 2 * 2 + 11 * 12))

  def test_every_rank_submitted_the_same_collectives(self):
    counts = {self.values[r]["submitted"] for r in range(NODES * SLOTS)}
    self.assertEqual(len(counts), 1, counts)
    self.assertGreater(counts.pop(), 500)


if __name__ == "__main__":
  unittest.main()
