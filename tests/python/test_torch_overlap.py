"""DistributedOptimizer overlaps communication with backward: checked from the order of
recorded events (optimizer.event_log), never from clocks.

Two ranks on one daemon train a model of several layers with buckets of about one layer each.
In every step the first bucket's allreduce must start before the last gradient hook of the
backward pass fires, and every bucket must start during backward (none left for step()).
A second model has a parameter without gradient: its bucket starts in synchronize() instead,
and the others still start during backward.
"""

import unittest

import harness

try:
  import torch
except ImportError:  # the test skips itself
  torch = None

RANKS = 2
LAYERS, WIDTH = 6, 32
STEPS = 3


def build_model(with_unused):
  torch.manual_seed(0)
  layers = []
  for _ in range(LAYERS):
    layers += [torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU()]
  model = torch.nn.Sequential(*layers)
  if with_unused:
    model.register_parameter("unused", torch.nn.Parameter(torch.zeros(3)))
  return model


def events_rank(with_unused):
  """A rank: trains STEPS steps; returns every step's events as [kind, name] and the buckets."""
  import ringsync.torch as rst
  rst.init()
  model = build_model(with_unused)
  layer_bytes = (WIDTH * WIDTH + WIDTH) * 4
  optimizer = rst.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01),
                                       named_parameters=model.named_parameters(),
                                       bucket_bytes=layer_bytes)
  generator = torch.Generator().manual_seed(rst.rank())
  for _ in range(STEPS):
    optimizer.zero_grad(set_to_none=True)
    model(torch.randn(16, WIDTH, generator=generator)).pow(2).mean().backward()
    optimizer.step()
  steps = [[[e.kind, e.name] for e in step] for step in optimizer.event_log.steps]
  rst.shutdown()
  return {"steps": steps, "buckets": optimizer.buckets}


def first(events, kind):
  return next(i for i, (k, _) in enumerate(events) if k == kind)


def last(events, kind):
  return max(i for i, (k, _) in enumerate(events) if k == kind)


@unittest.skipIf(torch is None, "PyTorch is not installed")
class TorchOverlapTest(unittest.TestCase):
  def run_model(self, with_unused):
    with harness.Daemon() as daemon:
      results = harness.run_ranks(daemon, RANKS, "test_torch_overlap:events_rank",
                                  args=[with_unused], timeout=90)
      harness.check_ranks(results)
    return [r.value for r in results]

  def test_allreduce_starts_before_backward_ends(self):
    for rank, value in enumerate(self.run_model(False)):
      buckets = value["buckets"]
      self.assertGreaterEqual(len(buckets), LAYERS)
      # Buckets follow reverse registration order: the last layer's gradients come first.
      self.assertEqual(buckets[0][1][0], "%d.bias" % (2 * (LAYERS - 1)))
      self.assertEqual(len(value["steps"]), STEPS)
      for step, events in enumerate(value["steps"]):
        where = "rank %d step %d: %s" % (rank, step, events)
        self.assertLess(first(events, "allreduce"), last(events, "hook"), where)
        self.assertLess(last(events, "hook"), first(events, "backward_end"), where)
        started = [name for kind, name in events if kind == "allreduce"]
        self.assertEqual(sorted(started), sorted(name for name, _ in buckets), where)
        self.assertLess(last(events, "allreduce"), first(events, "backward_end"), where)
        self.assertNotIn("allreduce_at_sync", [kind for kind, _ in events], where)
        self.assertEqual([kind for kind, _ in events][-2:], ["synchronize", "step"], where)

  def test_bucket_with_unused_parameter_starts_at_synchronize(self):
    for rank, value in enumerate(self.run_model(True)):
      late = [name for name, params in value["buckets"] if "unused" in params]
      self.assertEqual(len(late), 1)
      for step, events in enumerate(value["steps"]):
        where = "rank %d step %d: %s" % (rank, step, events)
        self.assertIn(["allreduce_at_sync", late[0]], events, where)
        self.assertLess(first(events, "backward_end"), events.index(["allreduce_at_sync",
                                                                      late[0]]), where)
        self.assertLess(first(events, "allreduce"), last(events, "hook"), where)


if __name__ == "__main__":
  unittest.main()
