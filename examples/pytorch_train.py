#!/usr/bin/env python3
"""Data-parallel training of a small MLP with ringsync.torch (synthetic, seeded data).

Run it under the launcher (2 simulated nodes x 2 processes, from the repository root):

    PYTHONPATH=client/python build/bin/ringsync launch --nodes 2 --slots 2 -- \
        python3 examples/pytorch_train.py

Every rank builds the model from its own seed (so the weights start out different),
broadcast_parameters() gives all of them rank 0's, and DistributedOptimizer averages the
gradients of each rank's shard of the global batch. Rank 0 prints the loss averaged over all
ranks every few steps; it falls as the MLP learns the labels of a fixed random "teacher".

`import ringsync` must work: install the package (pip install client/python) or set
PYTHONPATH=client/python. If it does not, this script falls back to the client/python folder
of the repository it lives in. The library is found as docs/python.md describes
(RINGSYNC_LIBRARY, the build tree, ...). There is no single-process mode: ringsync needs its
daemon, which the launcher starts.
"""

import argparse
import os
import sys

try:
  import ringsync  # noqa: F401
except ImportError:
  sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "client",
                                  "python"))

import torch
import torch.nn.functional as F

import ringsync.torch as rst


def parse_args():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--steps", type=int, default=80)
  parser.add_argument("--batch-size", type=int, default=32, help="samples per rank per step")
  parser.add_argument("--lr", type=float, default=0.05)
  parser.add_argument("--log-every", type=int, default=10)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--fp16", action="store_true", help="send gradients as float16")
  return parser.parse_args()


FEATURES, CLASSES = 32, 8


def make_model():
  return torch.nn.Sequential(
      torch.nn.Linear(FEATURES, 128), torch.nn.ReLU(),
      torch.nn.Linear(128, 128), torch.nn.ReLU(),
      torch.nn.Linear(128, CLASSES))


def global_batch(step, size, args, teacher):
  """The step's global batch (the same on every rank): inputs and the teacher's labels."""
  generator = torch.Generator().manual_seed(args.seed * 100003 + step)
  x = torch.randn(size * args.batch_size, FEATURES, generator=generator)
  return x, (x @ teacher).argmax(dim=1)


def connect():
  """Joins the job; a clear message instead of a traceback when there is no daemon."""
  # Without RINGSYNC_SOCKET we try the daemon's default socket, briefly.
  timeout = None if "RINGSYNC_SOCKET" in os.environ else 2.0
  try:
    rst.init(connect_timeout=timeout)
  except rst.RingsyncError as error:
    sys.exit("pytorch_train.py: no ringsync daemon to join (%s).\n"
             "ringsync has no single-process mode; run this script under the launcher:\n"
             "  ringsync launch --nodes 2 --slots 2 -- python3 examples/pytorch_train.py\n"
             "or start ringsyncd and set RINGSYNC_SOCKET, RINGSYNC_LOCAL_RANK and "
             "RINGSYNC_LOCAL_SIZE." % error)


def main():
  args = parse_args()
  connect()
  rank, size = rst.rank(), rst.size()

  torch.manual_seed(args.seed + rank)  # divergent on purpose: broadcast_parameters fixes it
  model = make_model()
  teacher = torch.randn(FEATURES, CLASSES, generator=torch.Generator().manual_seed(args.seed))

  optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
  optimizer = rst.DistributedOptimizer(
      optimizer, named_parameters=model.named_parameters(),
      compression=rst.Compression.fp16 if args.fp16 else rst.Compression.none)
  rst.broadcast_parameters(model.state_dict(), root_rank=0)
  rst.broadcast_optimizer_state(optimizer, root_rank=0)

  if rank == 0:
    print("training on %d ranks (%d nodes x %d), %d samples per step" %
          (size, rst.num_nodes(), rst.local_size(), size * args.batch_size), flush=True)
  first = last = None
  window = []  # this rank's losses since the last report
  for step in range(args.steps):
    x, y = global_batch(step, size, args, teacher)
    shard = slice(rank * args.batch_size, (rank + 1) * args.batch_size)
    optimizer.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x[shard]), y[shard])
    loss.backward()
    optimizer.step()
    window.append(loss.item())
    if (step + 1) % args.log_every == 0 or step == args.steps - 1:
      # The mean over the window and over all ranks (every rank takes part in the allreduce).
      mean = rst.allreduce(torch.tensor(sum(window) / len(window)), name="loss").item()
      window = []
      first = mean if first is None else first
      last = mean
      if rank == 0:
        print("step %3d  loss %.4f" % (step + 1, mean), flush=True)

  # Every rank must hold the same weights: compare a checksum across ranks.
  checksum = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).double().sum()
  lowest = rst.allreduce(checksum, name="checksum.min", op=rst.Min)
  highest = rst.allreduce(checksum, name="checksum.max", op=rst.Max)
  if rank == 0:
    print("loss %.4f -> %.4f; weights identical on all ranks: %s"
          % (first, last, bool(lowest == highest)), flush=True)
  rst.shutdown()
  return 0 if lowest == highest and last < first else 1


if __name__ == "__main__":
  sys.exit(main())
