"""ringsync.elastic against a real ringsyncd: states commit, restore and sync; the daemon keeps
each rank's last commit after the trainer is gone; a rank that crashes mid-training is
restarted, resumes from its daemon's copy while the other rank goes back to its last commit,
and the job ends with what a run without the crash gives."""

import os
import subprocess
import sys
import unittest

import numpy

from harness import Daemon, check_ranks, run_ranks

STEPS = 8


def expected_w(ranks):
  """w after STEPS steps of w += sum over ranks of (rank + 1) * (step + 1)."""
  per_step = sum(r + 1 for r in range(ranks))
  return [float(sum(per_step * (s + 1) for s in range(STEPS)))] * 5


def trainer(crash_at=-1):
  """One rank: STEPS steps of an allreduce, committing after each. crash_at: rank 1 dies (as
  a killed process would) at the start of that step."""
  import ringsync as rs
  import ringsync.elastic as elastic
  state = elastic.ObjectState(step=0, w=numpy.zeros(5))
  ran = []

  @elastic.run
  def train(state):
    while state.step < STEPS:
      if state.step == crash_at and rs.rank() == 1:
        os._exit(3)
      g = numpy.full(5, float((rs.rank() + 1) * (state.step + 1)))
      state.w = state.w + rs.allreduce(g, name="g")
      ran.append(state.step)
      state.step += 1
      state.commit()

  train(state)
  return {"w": state.w.tolist(), "ran": ran, "resets": state.resets, "steps_lost": state.steps_lost,
          "rank": rs.rank()}


def restarted_rank(crash_at):
  """Rank 1 under a supervisor that restarts it once (as a container runtime or torchrun
  would): the first trainer process crashes at step crash_at, the second resumes."""
  import json
  import harness
  outputs = []
  for attempt in range(2):
    argv = [sys.executable, os.path.join(harness.HERE, "harness.py"), "call", "test_elastic_state:trainer",
            json.dumps([crash_at if attempt == 0 else -1])]
    env = dict(os.environ)
    result_dir = env.pop(harness.RESULT_DIR_ENV)
    env[harness.RESULT_DIR_ENV] = os.path.join(result_dir, "attempt%d" % attempt)
    os.makedirs(env[harness.RESULT_DIR_ENV])
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=100)
    outputs.append({"code": done.returncode, "stderr": done.stderr[-2000:],
                    "value": harness._result_value(env[harness.RESULT_DIR_ENV], harness._rank_id())})
  return outputs


def commit_then_vanish(value):
  """Commits once with `value`, then exits without a goodbye."""
  import ringsync as rs
  import ringsync.elastic as elastic
  rs.init()
  state = elastic.ObjectState(step=7, value=value)
  state.commit()
  os._exit(0)


def resume():
  """A fresh trainer of the same rank: what it finds kept."""
  import ringsync as rs
  import ringsync.elastic as elastic
  rs.init()
  state = elastic.ObjectState(step=0, value=None)
  adopted = state.load_kept()
  return {"adopted": adopted, "step": state.step, "value": state.value, "commits": state.commits}


def torch_sync():
  """Rank 0 trains a step and commits; rank 1 starts from other weights and no commit. After
  sync() both hold rank 0's model and optimizer state."""
  import torch
  import ringsync as rs
  import ringsync.elastic as elastic
  rs.init()
  torch.manual_seed(100 + rs.rank())
  model = torch.nn.Linear(4, 3)
  optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
  state = elastic.TorchState(model, optimizer, step=0)
  if rs.rank() == 0:
    model(torch.ones(2, 4)).sum().backward()
    optimizer.step()
    state.step = 1
    state.commit()
  root = state.sync()
  momentum = optimizer.state[model.weight]["momentum_buffer"]
  return {"root": root, "step": state.step, "weight": model.weight.detach().flatten().tolist(),
          "momentum": momentum.flatten().tolist()}


class StateTest(unittest.TestCase):

  def test_torch_state_restore_and_sync(self):
    try:
      import torch
    except ImportError:
      self.skipTest("no torch in this Python")
    import ringsync.elastic as elastic
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    state = elastic.TorchState(model, optimizer, keep_in_daemon=False, step=0)
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    state.step = 1
    state.commit()
    saved = [p.detach().clone() for p in model.parameters()]
    exp_avg = optimizer.state[model.weight]["exp_avg"].clone()
    for _ in range(3):  # more steps, not committed
      model(torch.ones(1, 3)).sum().backward()
      optimizer.step()
    state.step = 4
    state.restore()
    self.assertEqual(state.step, 1)
    for p, s in zip(model.parameters(), saved):
      self.assertTrue(torch.equal(p, s))
    self.assertTrue(torch.equal(optimizer.state[model.weight]["exp_avg"], exp_avg))
    with Daemon() as daemon:
      results = run_ranks(daemon, 2, "test_elastic_state:torch_sync", job_id="torch-sync")
      check_ranks(results)
      self.assertEqual(results[0].value["root"], 0)
      self.assertEqual(results[1].value, results[0].value)
      self.assertEqual(results[1].value["step"], 1)

  def test_commit_restore_and_values(self):
    import ringsync.elastic as elastic
    state = elastic.ObjectState(keep_in_daemon=False, step=0, weights=[1, 2])
    state.restore()  # before any commit: nothing to go back to
    self.assertEqual(state.step, 0)
    state.step = 3
    state.weights = [5]
    state.commit()
    state.step = 4
    state.weights.append(6)
    state.restore()
    self.assertEqual(state.step, 3)
    self.assertEqual(state.weights, [5])
    self.assertEqual(state.commits, 1)
    with self.assertRaises(AttributeError):
      state.unknown  # pylint: disable=pointless-statement

  def test_durable_commits_are_whole_files(self):
    import tempfile
    import ringsync.elastic as elastic
    with tempfile.TemporaryDirectory() as folder:
      state = elastic.ObjectState(keep_in_daemon=False, durable_dir=folder, durable_every=2, step=0)
      for step in range(1, 6):
        state.step = step
        state.commit()
      self.assertEqual([f for f in os.listdir(folder) if f.startswith(".")], [])  # no leftovers
      fresh = elastic.ObjectState(keep_in_daemon=False, durable_dir=folder, step=0)
      self.assertTrue(fresh.load_kept())
      self.assertEqual(fresh.step, 4)  # the last commit written: every 2nd
      self.assertEqual(fresh.commits, 4)

  def test_the_daemon_keeps_the_last_commit_after_the_trainer_is_gone(self):
    with Daemon() as daemon:
      first = run_ranks(daemon, 1, "test_elastic_state:commit_then_vanish", args=["kept!"], job_id="vanish")
      check_ranks(first)
      again = run_ranks(daemon, 1, "test_elastic_state:resume", job_id="vanish")
      check_ranks(again)
      self.assertEqual(again[0].value, {"adopted": True, "step": 7, "value": "kept!", "commits": 1})
      other = run_ranks(daemon, 1, "test_elastic_state:resume", job_id="another-job")
      check_ranks(other)
      self.assertFalse(other[0].value["adopted"])
      self.assertGreater(daemon.metric("ringsync_kept_state_bytes"), 0)

  def test_elastic_a_crashed_rank_resumes_from_its_daemon_and_the_job_finishes_right(self):
    with Daemon() as daemon:
      # Rank 0: the trainer; rank 1: a supervisor restarting its trainer once.
      results = run_ranks(daemon, 2, "test_elastic_state:dispatch", args=[4], job_id="elastic-crash",
                          timeout=150)
      check_ranks(results)
      survivor = results[0].value
      attempts = results[1].value
      self.assertEqual(attempts[0]["code"], 3, attempts)  # the crash
      self.assertEqual(attempts[1]["code"], 0, attempts)
      resumed = attempts[1]["value"]
      want = expected_w(2)
      self.assertEqual(survivor["w"], want)
      self.assertEqual(resumed["w"], want)
      self.assertEqual(survivor["resets"], 1)
      # The survivor ran every step once (the crash came before step 4's allreduce ended);
      # the restarted rank resumed at step 4 from its daemon's copy, not from 0.
      self.assertEqual(survivor["ran"], list(range(STEPS)))
      self.assertEqual(resumed["ran"], list(range(4, STEPS)))
      self.assertLessEqual(survivor["steps_lost"], 1)


def dispatch(crash_at):
  """Rank 0 trains; rank 1 is the supervised, restarted trainer."""
  if os.environ.get("RINGSYNC_LOCAL_RANK") == "1":
    return restarted_rank(crash_at)
  return trainer(crash_at)


if __name__ == "__main__":
  unittest.main()
