#!/usr/bin/env python3
"""Elastic training with ringsync: a small PyTorch model trained on the nodes of an elastic
job. Kill a node (its ringsyncd and trainer) at any step: the others go back to their last
commit, the job's next ring forms with a spare node in the lost one's place (or with fewer
nodes, down to RINGSYNC_MIN_NODES), the spare receives the state, and training goes on.

On every node, a ringsyncd that finds the others through etcd (docs/elastic.md):

    ringsyncd --control-address HOST:29517 --rendezvous etcd://ETCD:2379 --rendezvous-lease 2s &

and on every node, spares included, the trainer:

    RINGSYNC_JOB_ID=demo RINGSYNC_JOB_TOKEN=secret \\
    RINGSYNC_MIN_NODES=2 RINGSYNC_MAX_NODES=3 RINGSYNC_NUM_NODES=3 \\
        python3 examples/elastic_train.py --steps 40 --step-delay 0.2

Each step prints a JSON line (step, rank, size, the global mean loss); the end prints the
final loss, the resets and the steps they cost. `--reference` trains the same model in one
process without ringsync: the elastic run ends with the same weights (within float rounding),
however many nodes it had at each step, because every step uses the same global batch, split
evenly among the ranks of the moment.
"""

import argparse
import json
import os
import sys
import time

import torch

GLOBAL_BATCH = 12  # split evenly among 1, 2, 3, 4 or 6 ranks
FEATURES = 8


def batch(step):
  """The global batch of `step`: the same on every rank and in every run."""
  generator = torch.Generator().manual_seed(1000 + step)
  x = torch.randn(GLOBAL_BATCH, FEATURES, generator=generator)
  y = x @ (torch.arange(1.0, FEATURES + 1.0).unsqueeze(1) * 0.1) + 0.5
  return x, y


def make_model():
  torch.manual_seed(0)
  model = torch.nn.Sequential(torch.nn.Linear(FEATURES, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
  optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
  return model, optimizer


def weights(model):
  return torch.cat([p.detach().flatten() for p in model.parameters()]).tolist()


def reference(steps):
  """The same training in one process over the whole batch."""
  model, optimizer = make_model()
  loss = None
  for step in range(steps):
    x, y = batch(step)
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
  return {"final_loss": float(loss), "weights": weights(model)}


def elastic(steps, step_delay):
  import ringsync as rs
  import ringsync.elastic as el

  model, optimizer = make_model()
  state = el.TorchState(model, optimizer, step=0, loss=float("nan"))
  started = time.time()

  @el.run
  def train(state):
    while state.step < steps:
      rank, size = rs.rank(), rs.size()
      x, y = batch(state.step)
      shard = slice(rank * GLOBAL_BATCH // size, (rank + 1) * GLOBAL_BATCH // size)
      optimizer.zero_grad()
      loss = torch.nn.functional.mse_loss(model(x[shard]), y[shard])
      loss.backward()
      # The mean of the shards' mean gradients: the gradient of the global batch's mean loss.
      flat = torch.cat([p.grad.flatten() for p in model.parameters()])
      flat = rs.allreduce(flat, op=rs.Average, name="grads")
      offset = 0
      for p in model.parameters():
        p.grad.copy_(flat[offset:offset + p.numel()].view_as(p))
        offset += p.numel()
      optimizer.step()
      state.loss = float(rs.allreduce(loss.detach().reshape(1), op=rs.Average, name="loss")[0])
      print(json.dumps({"step": state.step, "rank": rank, "size": size, "loss": state.loss,
                        "t": time.time()}), flush=True)
      state.step += 1
      state.commit()
      if step_delay:
        time.sleep(step_delay)

  train(state)
  return {"final_loss": state.loss, "weights": weights(model), "resets": state.resets,
          "steps_lost": state.steps_lost, "rank": rs.rank(), "size": rs.size(),
          "seconds": time.time() - started}


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--steps", type=int, default=40)
  parser.add_argument("--step-delay", type=float, default=0.0, help="seconds to sleep after each step")
  parser.add_argument("--reference", action="store_true", help="train in one process, without ringsync")
  parser.add_argument("--out", help="also write the result (JSON) to this file")
  parser.add_argument("--join-when", metavar="FILE",
                      help="wait until FILE exists before joining (a spare started with the others, "
                           "set to join later)")
  args = parser.parse_args()
  if args.join_when:
    while not os.path.exists(args.join_when):
      time.sleep(0.05)
  result = reference(args.steps) if args.reference else elastic(args.steps, args.step_delay)
  text = json.dumps(result)
  if args.out:
    with open(args.out, "w") as f:
      f.write(text)
  print("RESULT " + text, flush=True)
  if not args.reference:
    print("final loss %.6f after %d steps; %d reset(s) on this rank, %d step(s) lost"
          % (result["final_loss"], args.steps, result["resets"], result["steps_lost"]), file=sys.stderr)


if __name__ == "__main__":
  main()
