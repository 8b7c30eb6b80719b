"""Errors: the daemon's (mismatch, collective timeout, peer lost) raise RingsyncError with its
message; bad arguments raise TypeError/ValueError/RingsyncError before anything is sent; a
missing library, no daemon or no numpy say what is wrong."""

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import harness

HAVE_TORCH = importlib.util.find_spec("torch") is not None


def _raises(status, fragments, call, *args, **kwargs):
  """Runs call; fails unless it raises RingsyncError `status` whose message holds every
  fragment. Returns the error."""
  import ringsync as rs
  try:
    call(*args, **kwargs)
  except rs.RingsyncError as e:
    assert e.status == status, "want %s, got %r" % (status, e)
    for fragment in fragments:
      assert fragment in e.message, "%r not in %r" % (fragment, e.message)
    assert e.message in str(e)
    return e
  raise AssertionError("%s did not raise %s" % (getattr(call, "__name__", call), status))


def rank_daemon_errors():
  """Two ranks that disagree on purpose; both see the daemon's explanation."""
  import threading
  import numpy as np
  import ringsync as rs
  rs.init()
  rank = rs.rank()

  e = _raises("MISMATCH", ["grad.w", "count", "4", "5"], rs.allreduce,
              np.zeros(4 + rank, np.float32), name="grad.w")
  _raises("MISMATCH", ["grad.b", "dtype", "f32", "f64"], rs.allreduce,
          np.zeros(4, np.float32 if rank == 0 else np.float64), name="grad.b")
  _raises("MISMATCH", ["grad.op", "op"], rs.allreduce, np.zeros(4),
          op=rs.Sum if rank == 0 else rs.Max, name="grad.op")
  _raises("MISMATCH", ["weights", "root"], rs.broadcast, np.zeros(4), root=rank, name="weights")
  _raises("MISMATCH", ["mixed", "collective"],
          (lambda: rs.allreduce(np.zeros(2), name="mixed")) if rank == 0 else
          (lambda: rs.broadcast(np.zeros(2), name="mixed")))
  assert e.status == "MISMATCH" and isinstance(e, RuntimeError)

  # Async: the failure comes out of wait(), every time, with the same message.
  handle = rs.allreduce_async(np.zeros(2 + rank), name="async.w")
  first = _raises("MISMATCH", ["async.w"], handle.wait)
  second = _raises("MISMATCH", ["async.w"], handle.wait)
  assert first.message == second.message
  assert handle.done()

  # rs_last_error() is per thread: a collective submitted here and waited on another thread
  # still reports the daemon's message there.
  handle = rs.allreduce_async(np.zeros(3 + rank), name="threaded.w")
  seen = []
  waiter = threading.Thread(target=lambda: seen.append(_raises("MISMATCH", ["threaded.w"],
                                                               handle.wait)))
  waiter.start()
  waiter.join(60)
  assert seen, "the waiting thread did not see the error"

  # Refused before anything is sent: a root that is no rank.
  for root in (2, 7, -1):
    _raises("INVALID_ARGUMENT", ["root %d" % root], rs.broadcast, np.zeros(2), root=root,
            name="bad.root")
  _raises("INVALID_ARGUMENT", ["name is empty"], rs.allreduce, np.zeros(2), name="")

  # The job carries on after all that.
  assert (rs.allreduce(np.ones(3), name="still.fine") == 2).all()

  # Peer lost: rank 1 leaves while rank 0 waits for it on "orphan".
  if rank == 0:
    orphan = rs.allreduce_async(np.ones(2), name="orphan")
    rs.barrier(name="leaving")
    _raises("PEER_LOST", ["local rank 1", "disconnected", "orphan"], orphan.wait, timeout=60)
  else:
    rs.barrier(name="leaving")
    os._exit(7)  # no shutdown: the daemon sees the connection drop
  return "ok"


def rank_collective_timeout():
  """Rank 0 of 2 submits a tensor rank 1 never submits (rank 1 is not even started)."""
  import numpy as np
  import ringsync as rs
  rs.init()
  assert rs.size() == 2
  _raises("TIMEOUT", ["lonely", "timed out", "local rank(s) 1", "never submitted"],
          rs.allreduce, np.ones(2), name="lonely")
  h = rs.barrier_async(name="lonely.barrier")
  _raises("TIMEOUT", ["lonely.barrier"], h.wait, timeout=60)
  return "ok"


def rank_without_numpy():
  """`import ringsync` and everything but numpy collectives work when numpy cannot be
  imported (torch-only users)."""
  sys.modules["numpy"] = None  # any `import numpy` now raises ImportError
  import ringsync as rs
  rs.init()
  rs.barrier()
  assert rs.size() == 1 and rs.rank() == 0 and rs.num_nodes() == 1 and rs.node_rank() == 0
  h = rs.barrier_async(name="async")
  assert h.wait() is None
  try:
    rs.allreduce([1.0, 2.0])
    raise AssertionError("allreduce of a list did not raise")
  except TypeError as e:
    assert "numpy.ndarray or a torch.Tensor" in str(e), str(e)
  try:
    rs.empty(4, "float32")
    raise AssertionError("rs.empty() without numpy did not raise")
  except ImportError:
    pass
  rs.shutdown()
  return "ok"


def _python(code, env):
  """Runs `python -c code` (no daemon involved); returns (exit status, output)."""
  done = subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT, timeout=60)
  return done.returncode, done.stdout.decode("utf-8", "replace")


class DaemonErrorsTest(unittest.TestCase):

  def test_mismatch_bad_root_and_peer_lost_carry_the_daemons_message(self):
    with harness.Daemon() as daemon:
      results = harness.run_ranks(daemon, 2, "test_api_errors:rank_daemon_errors", timeout=120)
    self.assertEqual(results[1].returncode, 7, results[1].describe())
    harness.check_ranks(results[:1])

  def test_collective_timeout(self):
    with harness.Daemon("--collective-timeout", "1s") as daemon:
      results = harness.run_ranks(daemon, 1, "test_api_errors:rank_collective_timeout",
                                  timeout=120, env={"RINGSYNC_LOCAL_SIZE": "2"})
    harness.check_ranks(results)

  def test_no_daemon_is_a_clear_error(self):
    with tempfile.TemporaryDirectory() as folder:
      missing = os.path.join(folder, "nobody.sock")
      code, out = _python(
          "import ringsync as rs\n"
          "try:\n"
          "  rs.init(connect_timeout=0.2)\n"
          "except rs.RingsyncError as e:\n"
          "  print(e.status, e.message)\n",
          harness.clean_env({"RINGSYNC_SOCKET": missing}))
    self.assertEqual(code, 0, out)
    self.assertIn("CLOSED", out)
    self.assertIn(missing, out)

  def test_works_without_numpy(self):
    with harness.Daemon() as daemon:
      results = harness.run_ranks(daemon, 1, "test_api_errors:rank_without_numpy", timeout=60)
    harness.check_ranks(results)


class LocalErrorsTest(unittest.TestCase):
  """Errors found in Python, before the library or the daemon is involved."""

  @classmethod
  def setUpClass(cls):
    os.environ["RINGSYNC_LIBRARY"] = harness.library()

  def test_arguments(self):
    import numpy as np
    import ringsync as rs
    self.assertFalse(rs.is_initialized())
    for dtype in (np.int16, np.complex64, np.bool_, ">f4"):
      with self.assertRaises(TypeError) as caught:
        rs.allreduce(np.zeros(3, dtype=dtype))
      self.assertIn(str(np.dtype(dtype)), str(caught.exception))
    with self.assertRaisesRegex(TypeError, "numpy.ndarray or a torch.Tensor, not list"):
      rs.broadcast([1, 2])
    with self.assertRaisesRegex(ValueError, "unknown reduce op 'median'"):
      rs.allreduce(np.zeros(3), op="median")
    with self.assertRaisesRegex(ValueError, "unknown reduce op 9"):
      rs.allreduce(np.zeros(3), op=9)
    with self.assertRaisesRegex(TypeError, "name must be a str"):
      rs.allreduce(np.zeros(3), name=5)
    with self.assertRaisesRegex(TypeError, "root must be an int"):
      rs.broadcast(np.zeros(3), root="0")
    column = np.zeros((4, 2))[:, 0]
    with self.assertRaisesRegex(ValueError, "contiguous"):
      rs.allreduce(column, out=column)
    with self.assertRaisesRegex(ValueError, "out must be contiguous"):
      rs.allreduce(np.zeros(4), out=np.zeros((4, 2))[:, 1])
    with self.assertRaisesRegex(TypeError, "out has dtype float32"):
      rs.allreduce(np.zeros(4), out=np.zeros(4, np.float32))
    with self.assertRaisesRegex(ValueError, "out has 5 elements but the result has 4"):
      rs.allreduce(np.zeros(4), out=np.zeros(5))
    frozen = np.zeros(4)
    frozen.flags.writeable = False
    with self.assertRaisesRegex(ValueError, "read-only"):
      rs.allreduce(frozen, out=frozen)
    with self.assertRaises(rs.RingsyncError) as caught:
      rs.allreduce(np.zeros(4))
    self.assertEqual(caught.exception.status, "NOT_INITIALIZED")
    self.assertIn("ringsync.init()", caught.exception.message)
    with self.assertRaises(rs.RingsyncError) as caught:
      rs.empty(3, "float32")
    self.assertEqual(caught.exception.status, "NOT_INITIALIZED")
    with self.assertRaisesRegex(ValueError, "framework"):
      rs.empty(3, "float32", framework="jax")

  @unittest.skipUnless(HAVE_TORCH, "torch is not installed")
  def test_device_tensors_take_the_device_route(self):
    import torch
    import ringsync as rs
    # A 'meta' tensor stands in for a GPU tensor: not on the CPU, no memory.
    with self.assertRaises(rs.RingsyncError) as caught:
      rs.allreduce(torch.empty(4, device="meta"))
    self.assertEqual(caught.exception.status, "UNSUPPORTED")
    self.assertIn("device 'meta'", caught.exception.message)  # more in test_api_devices.py
    with self.assertRaisesRegex(TypeError, "torch.bool"):
      rs.allreduce(torch.zeros(3, dtype=torch.bool))
    with self.assertRaisesRegex(TypeError, "numpy has no bfloat16"):
      rs.empty(3, torch.bfloat16)


class LibraryTest(unittest.TestCase):
  """Where the package looks for libringsync.so, and what it says when it is not there."""

  def test_explicit_library_that_is_missing(self):
    env = harness.clean_env({"RINGSYNC_LIBRARY": "/nonexistent/libringsync.so"})
    code, out = _python(
        "import ringsync as rs\n"  # importing needs no library: it loads on first use
        "try:\n"
        "  rs.init()\n"
        "except ImportError as e:\n"
        "  assert isinstance(e, rs.RingsyncError) and e.status == 'LIBRARY_NOT_FOUND'\n"
        "  print(e)\n", env)
    self.assertEqual(code, 0, out)
    self.assertIn("/nonexistent/libringsync.so ($RINGSYNC_LIBRARY): not found", out)
    self.assertIn("$RINGSYNC_LIBRARY names a library that cannot be loaded", out)
    self.assertNotIn("system loader", out)  # an explicit path is not second-guessed

  def test_nothing_found_lists_every_place_tried(self):
    with tempfile.TemporaryDirectory() as folder:
      # A copy of the package away from any build tree, no RINGSYNC_LIBRARY, no loader path.
      shutil.copytree(os.path.join(harness.PYTHON_PACKAGE_DIR, "ringsync"),
                      os.path.join(folder, "ringsync"),
                      ignore=shutil.ignore_patterns("__pycache__", "*.so*", "torch"))
      env = harness.clean_env({"PYTHONPATH": folder})
      del env["RINGSYNC_LIBRARY"]
      env.pop("LD_LIBRARY_PATH", None)
      code, out = _python(
          "import ringsync as rs\n"
          "try:\n"
          "  rs.library_path()\n"
          "except rs.LibraryNotFoundError as e:\n"
          "  print(e)\n", env)
    self.assertEqual(code, 0, out)
    for fragment in ("next to the package", "the repository's build tree", "the system loader",
                     "$RINGSYNC_LIBRARY is not set", os.path.join(folder, "ringsync")):
      self.assertIn(fragment, out)

  def test_library_found_from_a_folder_or_next_to_the_package(self):
    env = harness.clean_env({"RINGSYNC_LIBRARY": os.path.dirname(harness.library())})
    code, out = _python("import ringsync as rs; print(rs.library_path())", env)
    self.assertEqual(code, 0, out)
    self.assertEqual(os.path.dirname(out.strip()), os.path.dirname(harness.library()))
    with tempfile.TemporaryDirectory() as folder:
      package = os.path.join(folder, "ringsync")
      shutil.copytree(os.path.join(harness.PYTHON_PACKAGE_DIR, "ringsync"), package,
                      ignore=shutil.ignore_patterns("__pycache__", "torch"))
      shutil.copy(os.path.realpath(harness.library()), os.path.join(package, "libringsync.so"))
      env = harness.clean_env({"PYTHONPATH": folder})
      del env["RINGSYNC_LIBRARY"]
      code, out = _python("import ringsync as rs; print(rs.library_path())", env)
    self.assertEqual(code, 0, out)
    self.assertEqual(out.strip(), os.path.join(package, "libringsync.so"))


if __name__ == "__main__":
  unittest.main()
