"""DistributedOptimizer trains exactly like one process on the whole batch.

2 nodes x 2 slots under `ringsync launch`. Every rank builds the model from its own seed
(divergent weights), broadcast_parameters() gives them rank 0's, then 20 steps of
DistributedOptimizer on the rank's shard of each global batch. Afterwards every rank's weights
are identical to the others' (bit for bit) and equal, within float tolerance, to training in
this process on the concatenated batches, starting from rank 0's initial weights.

Scenarios (one launch runs them all):
- sgd: SGD with momentum and weight decay, several buckets, zero_grad() keeping zeroed grads.
- adam_accumulate: Adam, backward_passes_per_step=2 (two micro-batches per step), zero_grad
  (set_to_none=True), a layer only rank 0's loss uses (the other ranks have no gradient for
  it) and a parameter no rank uses (its grad must stay None, so weight decay leaves it alone).
"""

import unittest

import harness

try:
  import torch
  import torch.nn.functional as F
except ImportError:  # the test skips itself
  torch = None

NODES, SLOTS = 2, 2
STEPS = 20
BATCH = 8  # samples per rank per micro-batch
FEATURES, CLASSES = 6, 3

SCENARIOS = {
    "sgd": dict(optimizer="sgd", passes=1, set_to_none=False, bucket_bytes=600, extra=False),
    "adam_accumulate": dict(optimizer="adam", passes=2, set_to_none=True, bucket_bytes=2048,
                            extra=True),
}


def build_model(extra, seed):
  torch.manual_seed(seed)
  layers = torch.nn.ModuleDict({
      "fc1": torch.nn.Linear(FEATURES, 16),
      "fc2": torch.nn.Linear(16, 16),
      "fc3": torch.nn.Linear(16, CLASSES),
  })
  if extra:
    layers["aux"] = torch.nn.Linear(FEATURES, 2)              # only rank 0's loss uses it
    layers.register_parameter("unused", torch.nn.Parameter(torch.ones(4)))  # nobody does
  return layers


def forward(model, x):
  return model["fc3"](torch.tanh(model["fc2"](torch.tanh(model["fc1"](x)))))


def make_optimizer(kind, model):
  if kind == "sgd":
    return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=0.01)
  return torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=0.01)


def global_batch(step, micro, size):
  generator = torch.Generator().manual_seed(1000 * step + micro)
  teacher = torch.randn(FEATURES, CLASSES, generator=torch.Generator().manual_seed(7))
  x = torch.randn(size * BATCH, FEATURES, generator=generator)
  return x, (x @ teacher).argmax(dim=1)


def aux_loss(model, x):
  return model["aux"](x).pow(2).mean()


def train_rank():
  """A rank: every scenario; returns {scenario: {parameter name: weights as nested lists}}."""
  import ringsync.torch as rst
  rst.init()
  rank, size = rst.rank(), rst.size()
  results = {}
  for name, cfg in SCENARIOS.items():
    model = build_model(cfg["extra"], seed=100 + rank)  # divergent initial weights
    optimizer = rst.DistributedOptimizer(
        make_optimizer(cfg["optimizer"], model), named_parameters=model.named_parameters(),
        backward_passes_per_step=cfg["passes"], bucket_bytes=cfg["bucket_bytes"])
    rst.broadcast_parameters(model.state_dict(), root_rank=0)
    shard = slice(rank * BATCH, (rank + 1) * BATCH)
    for step in range(STEPS):
      optimizer.zero_grad(set_to_none=cfg["set_to_none"])
      for micro in range(cfg["passes"]):
        x, y = global_batch(step, micro, size)
        loss = F.cross_entropy(forward(model, x[shard]), y[shard])
        if cfg["extra"] and rank == 0:
          loss = loss + aux_loss(model, x[shard])
        loss.backward()
      optimizer.step()
    results[name] = {
        "weights": {n: p.detach().tolist() for n, p in model.named_parameters()},
        "buckets": len(optimizer.buckets),
        "at_sync": sorted({e.name for step in optimizer.event_log.steps for e in step
                           if e.kind == "allreduce_at_sync"}),
    }
  rst.shutdown()
  return results


def train_reference(cfg, size):
  """One process, the concatenated batches, rank 0's initial weights."""
  model = build_model(cfg["extra"], seed=100)
  optimizer = make_optimizer(cfg["optimizer"], model)
  for step in range(STEPS):
    optimizer.zero_grad(set_to_none=cfg["set_to_none"])
    for micro in range(cfg["passes"]):
      x, y = global_batch(step, micro, size)
      loss = F.cross_entropy(forward(model, x), y)
      if cfg["extra"]:  # rank 0's share of the mean over ranks
        loss = loss + aux_loss(model, x[:BATCH]) / size
      loss.backward()
    optimizer.step()
  return model


@unittest.skipIf(torch is None, "PyTorch is not installed")
class TorchEquivalenceTest(unittest.TestCase):
  @classmethod
  def setUpClass(cls):
    outcome = harness.launch("test_torch_equivalence:train_rank", nodes=NODES, slots=SLOTS,
                             timeout=120)
    outcome.check()
    cls.values = outcome.values

  def check_scenario(self, name):
    size = NODES * SLOTS
    ranks = [self.values[r][name] for r in range(size)]
    for r in range(1, size):
      self.assertEqual(ranks[r]["weights"], ranks[0]["weights"],
                       "rank %d's weights differ from rank 0's after %s" % (r, name))
    reference = train_reference(SCENARIOS[name], size)
    for pname, p in reference.named_parameters():
      got = torch.tensor(ranks[0]["weights"][pname])
      self.assertTrue(torch.allclose(got, p.detach(), rtol=1e-4, atol=1e-5),
                      "%s: %s differs from single-process training by %g" % (
                          name, pname, (got - p.detach()).abs().max().item()))
    return ranks[0], reference

  def test_sgd_momentum_matches_single_process(self):
    result, _ = self.check_scenario("sgd")
    self.assertGreater(result["buckets"], 2)  # the bucketing path, not one big bucket
    self.assertEqual(result["at_sync"], [])   # every bucket started during backward

  def test_adam_accumulation_and_parameters_without_gradient(self):
    result, reference = self.check_scenario("adam_accumulate")
    initial = build_model(True, seed=100)
    # No rank had a gradient for 'unused': p.grad stayed None, weight decay did not touch it.
    self.assertEqual(result["weights"]["unused"], initial.unused.tolist())
    # Only rank 0 had one for 'aux', yet every rank moved it the same way (checked above).
    self.assertNotEqual(result["weights"]["aux.weight"], initial["aux"].weight.tolist())
    # The buckets holding them had to wait for synchronize().
    self.assertTrue(result["at_sync"], "no bucket was completed in synchronize()")


if __name__ == "__main__":
  unittest.main()
