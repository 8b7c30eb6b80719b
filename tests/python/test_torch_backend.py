"""DistributedDataParallel and ZeroRedundancyOptimizer train the same over "ringsync" as over gloo.

2 nodes x 2 slots under `ringsync launch`. Each rank calls dist.init_process_group("ringsync")
with nothing but the launcher's environment, and opens a gloo group beside it. On each group in
turn it trains the same small model 20 steps on its shard of each global batch, starting from
its own seed (DDP gives every rank rank 0's weights): once with DDP and SGD (momentum, weight
decay, several gradient buckets), once with DDP and ZeroRedundancyOptimizer over Adam (each
rank steps its share of the parameters and broadcasts them). Afterwards every rank's weights
are identical to the others' on each backend, and equal, within float tolerance, to gloo's run
and to training in this process on the concatenated batches.
"""

import glob
import os
import unittest

import harness

try:
  import torch
  import torch.nn.functional as F
except ImportError:  # the test skips itself
  torch = None


def backend_missing():
  """Why the backend's tests cannot run here, or None: no torch, or no extension module built
  (the project builds it only where libtorch-dev and pybind11-dev are installed)."""
  if torch is None:
    return "PyTorch is not installed"
  if not glob.glob(os.path.join(harness.build_dir(), "lib", "_ringsync_torch*.so")):
    return ("the ringsync backend's extension (_ringsync_torch) is not built in %s (needs "
            "libtorch-dev and pybind11-dev)" % harness.build_dir())
  return None


NODES, SLOTS = 2, 2
STEPS = 20
BATCH = 8  # samples per rank
FEATURES, CLASSES = 6, 3
RUNS = ("ddp_sgd", "ddp_python_hook", "zero_adam")


def build_model(seed):
  torch.manual_seed(seed)
  return torch.nn.Sequential(torch.nn.Linear(FEATURES, 16), torch.nn.Tanh(),
                             torch.nn.Linear(16, 16), torch.nn.Tanh(),
                             torch.nn.Linear(16, CLASSES))


def global_batch(step, size):
  teacher = torch.randn(FEATURES, CLASSES, generator=torch.Generator().manual_seed(7))
  x = torch.randn(size * BATCH, FEATURES, generator=torch.Generator().manual_seed(1000 + step))
  return x, (x @ teacher).argmax(dim=1)


def sgd(params):
  return torch.optim.SGD(params, lr=0.1, momentum=0.9, weight_decay=0.01)


def train(run, group, rank, size):
  """One run on `group`; returns {parameter name: weights as nested lists}."""
  from torch.distributed.optim import ZeroRedundancyOptimizer
  from torch.nn.parallel import DistributedDataParallel
  model = build_model(seed=100 + rank)  # divergent: DDP broadcasts rank 0's
  # A small bucket cap: several buckets, allreduced while backward still runs.
  ddp = DistributedDataParallel(model, process_group=group, bucket_cap_mb=0.0005)
  if run == "ddp_python_hook":
    # torch's allreduce hook in Python: the future's callback (fut.then) runs on the thread
    # that completes the collective and takes the GIL there.
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    ddp.register_comm_hook(group, default_hooks.allreduce_hook)
  if run != "zero_adam":
    optimizer = sgd(ddp.parameters())
  else:
    optimizer = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.Adam,
                                        process_group=group, lr=0.01, weight_decay=0.01)
  shard = slice(rank * BATCH, (rank + 1) * BATCH)
  for step in range(STEPS):
    x, y = global_batch(step, size)
    optimizer.zero_grad()
    F.cross_entropy(ddp(x[shard]), y[shard]).backward()
    optimizer.step()
  return {name: p.detach().tolist() for name, p in model.named_parameters()}


def train_rank():
  """A rank: every run on ringsync, then on gloo. Returns {backend: {run: weights}}."""
  import torch.distributed as dist
  import ringsync.torch  # noqa: F401  (registers the backend)
  dist.init_process_group("ringsync")  # the launcher's RANK, WORLD_SIZE, MASTER_ADDR, ...
  rank, size = dist.get_rank(), dist.get_world_size()
  # The rest of torch's variables, as torchrun sets them.
  assert (int(os.environ["LOCAL_RANK"]), int(os.environ["LOCAL_WORLD_SIZE"])) == (
      rank % SLOTS, SLOTS), os.environ
  gloo = dist.new_group(backend="gloo")
  results = {}
  for backend, group in (("ringsync", dist.group.WORLD), ("gloo", gloo)):
    assert dist.get_backend(group) == backend, dist.get_backend(group)
    results[backend] = {run: train(run, group, rank, size) for run in RUNS}
  from ringsync.torch import distributed as rsd
  results["submitted"] = rsd.submitted(dist.group.WORLD)
  dist.destroy_process_group()
  return results


def train_reference(run, size):
  """One process, the concatenated batches, rank 0's initial weights."""
  model = build_model(seed=100)
  optimizer = (sgd(model.parameters()) if run != "zero_adam" else
               torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=0.01))
  for step in range(STEPS):
    x, y = global_batch(step, size)
    optimizer.zero_grad()
    F.cross_entropy(model(x), y).backward()
    optimizer.step()
  return {name: p.detach() for name, p in model.named_parameters()}


@unittest.skipIf(backend_missing(), backend_missing())
class TorchBackendTrainingTest(unittest.TestCase):
  @classmethod
  def setUpClass(cls):
    outcome = harness.launch("test_torch_backend:train_rank", nodes=NODES, slots=SLOTS,
                             timeout=150)
    outcome.check()
    cls.values = outcome.values

  def check_run(self, run):
    size = NODES * SLOTS
    for backend in ("ringsync", "gloo"):
      for r in range(1, size):
        self.assertEqual(self.values[r][backend][run], self.values[0][backend][run],
                         "%s %s: rank %d's weights differ from rank 0's" % (backend, run, r))
    ours, gloo = self.values[0]["ringsync"][run], self.values[0]["gloo"][run]
    reference = train_reference(run, size)
    initial = dict(build_model(seed=100).named_parameters())
    for name, expected in reference.items():
      got = torch.tensor(ours[name])
      self.assertFalse(torch.equal(got, initial[name].detach()), "%s did not train" % name)
      self.assertTrue(torch.allclose(got, torch.tensor(gloo[name]), rtol=1e-5, atol=1e-6),
                      "%s %s: ringsync and gloo differ by %g" % (
                          run, name, (got - torch.tensor(gloo[name])).abs().max().item()))
      self.assertTrue(torch.allclose(got, expected, rtol=1e-4, atol=1e-5),
                      "%s %s: ringsync and one process differ by %g" % (
                          run, name, (got - expected).abs().max().item()))

  def test_ddp_matches_gloo_and_single_process(self):
    self.check_run("ddp_sgd")

  def test_the_gradients_went_through_ringsync_in_several_buckets(self):
    # Per step and run at least two buckets' allreduces (ZeRO adds its broadcasts).
    for rank in range(NODES * SLOTS):
      self.assertGreaterEqual(self.values[rank]["submitted"], len(RUNS) * STEPS * 2)

  def test_ddp_with_a_python_comm_hook_matches_gloo_and_single_process(self):
    self.check_run("ddp_python_hook")

  def test_zero_redundancy_optimizer_matches_gloo_and_single_process(self):
    self.check_run("zero_adam")


if __name__ == "__main__":
  unittest.main()
