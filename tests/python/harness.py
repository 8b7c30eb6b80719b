"""Real daemons and real rank processes for the Python tests.

A test starts a ringsyncd in a temporary folder and runs N rank processes against it, each a
Python function in a test module (or a script) with the environment the launcher would give
it; or it runs a script or function under `ringsync launch --nodes N --slots L` (several
simulated nodes on this machine). Every wait is bounded; whatever a test starts is stopped,
even when the test fails.

    from harness import Daemon, run_ranks, check_ranks, launch

    def rank_body(n):                  # runs in each rank process (module level, importable)
      import ringsync as rs
      rs.init()
      return rs.allreduce(numpy.full(n, rs.rank())).tolist()   # JSON-able: back to the test

    class T(unittest.TestCase):
      def test_sum(self):
        with Daemon() as daemon:
          results = run_ranks(daemon, 3, "test_mine:rank_body", args=[4])
          check_ranks(results)                                   # raises with every output
          self.assertEqual(results[0].value, [3, 3, 3, 3])

      def test_two_nodes(self):
        outcome = launch("test_mine:rank_body", nodes=2, slots=2, args=[4])
        outcome.check()
        self.assertEqual(outcome.values[3], [6, 6, 6, 6])

A rank function's return value travels back as JSON (RankResult.value); an exception or a
failed assertion in it prints a traceback and fails the rank (exit 1). A rank that outlives
its timeout prints every thread's stack (faulthandler) and is killed.

The build tree: $RINGSYNC_BUILD_DIR (ctest sets it), else <repo>/build. Rank processes run
sys.executable with PYTHONPATH = client/python and this folder, and RINGSYNC_LIBRARY set to
the build tree's libringsync.so.

This file is also the rank processes' entry point: `python harness.py call MODULE:FUNCTION
[JSON-ARGS]`.
"""

import atexit
import faulthandler
import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PYTHON_PACKAGE_DIR = os.path.join(REPO, "client", "python")

# Environment the runner passes to rank processes.
RESULT_DIR_ENV = "RINGSYNC_TEST_RESULT_DIR"
DEADLINE_ENV = "RINGSYNC_TEST_DEADLINE_S"

_started = set()  # Popen objects still to stop at exit (a test that crashed half-way)


def build_dir():
  return os.environ.get("RINGSYNC_BUILD_DIR") or os.path.join(REPO, "build")


def binary(name):
  """A program of the build tree (bin/NAME); RuntimeError saying what to build if missing."""
  path = os.path.join(build_dir(), "bin", name)
  if not os.access(path, os.X_OK):
    raise RuntimeError("%s not found: build the project first (cmake --build %s), or set "
                       "RINGSYNC_BUILD_DIR to the build tree" % (path, build_dir()))
  return path


def library():
  return os.path.join(build_dir(), "lib", "libringsync.so")


def clean_env(extra=None):
  """This process's environment without RINGSYNC_* (daemons read their flags from it), with
  PYTHONPATH and RINGSYNC_LIBRARY set for rank processes, plus `extra`."""
  env = {k: v for k, v in os.environ.items() if not k.startswith("RINGSYNC_")}
  paths = [PYTHON_PACKAGE_DIR, HERE] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
  env["PYTHONPATH"] = os.pathsep.join(paths)
  env["PYTHONDONTWRITEBYTECODE"] = "1"
  env["RINGSYNC_LIBRARY"] = library()
  env.update(extra or {})
  return env


def _stop(process, grace):
  """SIGTERM to the process group, then SIGKILL after `grace` seconds. Returns the status."""
  if process.poll() is None:
    try:
      os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
      pass
    try:
      process.wait(grace)
    except subprocess.TimeoutExpired:
      try:
        os.killpg(process.pid, signal.SIGKILL)
      except ProcessLookupError:
        pass
      process.wait(10)
  _started.discard(process)
  return process.returncode


@atexit.register
def _stop_leftovers():
  for process in list(_started):
    _stop(process, 5)


def _spawn(argv, env, stdout_path, stderr_path=None):
  """Starts argv in a new session (its own process group), output to files."""
  with open(stdout_path, "wb") as out:
    err = open(stderr_path, "wb") if stderr_path else subprocess.STDOUT
    try:
      process = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                 start_new_session=True)
    finally:
      if stderr_path:
        err.close()
  _started.add(process)
  return process


def _read(path):
  try:
    with open(path, "rb") as f:
      return f.read().decode("utf-8", "replace")
  except OSError:
    return ""


class Daemon:
  """One ringsyncd serving one node, in a temporary folder. A context manager.

  `flags` are extra ringsyncd flags (e.g. "--collective-timeout", "2s"). The daemon listens on
  <tmp>/ringsyncd.sock, serves /metrics on an ephemeral port and logs to <tmp>/ringsyncd.log.
  """

  def __init__(self, *flags, log_level="info", start_timeout=30):
    self.flags = list(flags)
    self.log_level = log_level
    self.start_timeout = start_timeout
    self._tmp = None
    self.process = None
    self.socket = None
    self.metrics_address = None

  @property
  def dir(self):
    return self._tmp.name

  def start(self):
    self._tmp = tempfile.TemporaryDirectory(prefix="ringsync-pytest-")
    self.socket = os.path.join(self.dir, "ringsyncd.sock")
    self.log_path = os.path.join(self.dir, "ringsyncd.log")
    ready = os.path.join(self.dir, "ready")
    argv = [binary("ringsyncd"), "--socket", self.socket, "--metrics-address", "127.0.0.1:0",
            "--ready-file", ready, "--log-level", self.log_level] + self.flags
    self.process = _spawn(argv, clean_env(), self.log_path)
    deadline = time.monotonic() + self.start_timeout
    while True:
      fields = dict(line.split("=", 1) for line in _read(ready).splitlines() if "=" in line)
      if "metrics" in fields:
        self.metrics_address = fields["metrics"]
        self.socket = fields.get("socket", self.socket)
        return self
      if self.process.poll() is not None:
        log = self.log()
        self.stop()
        raise RuntimeError("ringsyncd exited during start-up:\n" + log)
      if time.monotonic() > deadline:
        log = self.log()
        self.stop()
        raise RuntimeError("ringsyncd was not ready in %d s:\n%s" % (self.start_timeout, log))
      time.sleep(0.01)

  def stop(self, grace=20):
    """Stops the daemon (SIGTERM, then SIGKILL); returns its exit status (None if never
    started). Removes its folder."""
    status = None
    if self.process is not None:
      status = _stop(self.process, grace)
      self.process = None
    if self._tmp is not None:
      self._tmp.cleanup()
      self._tmp = None
    return status

  def __enter__(self):
    return self.start()

  def __exit__(self, *exc):
    self.stop()

  def log(self):
    return _read(self.log_path)

  def rank_env(self, local_rank, local_size, job_id="default"):
    """The environment a trainer of this node gets from the launcher."""
    return {"RINGSYNC_SOCKET": self.socket, "RINGSYNC_JOB_ID": job_id,
            "RINGSYNC_LOCAL_RANK": str(local_rank), "RINGSYNC_LOCAL_SIZE": str(local_size),
            "RINGSYNC_RANK": str(local_rank), "RINGSYNC_SIZE": str(local_size),
            "RINGSYNC_TEST_METRICS": self.metrics_address}

  def metrics(self):
    """The daemon's /metrics as {'name{labels}': value}."""
    return fetch_metrics(self.metrics_address)

  def metric(self, name, labels=""):
    """The value of one sample, e.g. metric("ringsync_registered_buffer_bytes",
    'memory="host"'); 0.0 when the daemon has not exported it yet."""
    key = "%s{%s}" % (name, labels) if labels else name
    return self.metrics().get(key, 0.0)


def fetch_metrics(address):
  """{'name{labels}': value} from http://ADDRESS/metrics (Prometheus text format)."""
  with urllib.request.urlopen("http://%s/metrics" % address, timeout=10) as response:
    text = response.read().decode("utf-8")
  samples = {}
  for line in text.splitlines():
    if not line or line.startswith("#"):
      continue
    key, _, value = line.rpartition(" ")
    try:
      samples[key] = float(value)
    except ValueError:
      pass
  return samples


class RankResult:
  """How one rank process ended: returncode (None if killed at its timeout), its output, and
  the JSON value its function returned (None for scripts or failures)."""

  def __init__(self, rank, returncode, stdout, stderr, value, timed_out):
    self.rank = rank
    self.returncode = returncode
    self.stdout = stdout
    self.stderr = stderr
    self.value = value
    self.timed_out = timed_out

  @property
  def ok(self):
    return self.returncode == 0 and not self.timed_out

  def describe(self):
    state = "timed out" if self.timed_out else "exit %s" % self.returncode
    return "--- rank %s (%s)\nstdout:\n%s\nstderr:\n%s" % (self.rank, state, self.stdout,
                                                           self.stderr)


def _rank_argv(target, args):
  if target.endswith(".py"):
    return [sys.executable, target] + [str(a) for a in args]
  return [sys.executable, os.path.join(HERE, "harness.py"), "call", target, json.dumps(list(args))]


def _result_value(folder, rank):
  text = _read(os.path.join(folder, "rank-%s.json" % rank))
  return json.loads(text) if text else None


def run_ranks(daemon, size, target, args=(), job_id="default", timeout=120, env=None,
              rank_env=None):
  """Runs `size` rank processes of one job against `daemon` and waits for all of them.

  target: "module:function" (a module in this folder or on PYTHONPATH; the function gets
  `args` and may return a JSON-able value) or the path of a script (gets `args` as argv).
  env: extra environment for every rank; rank_env(rank) -> dict: extra environment per rank.
  Ranks still running after `timeout` seconds (shared by all) print their stacks and are
  killed. Returns [RankResult] in rank order.
  """
  with tempfile.TemporaryDirectory(prefix="ringsync-pyranks-") as folder:
    processes = []
    try:
      for rank in range(size):
        extra = dict(daemon.rank_env(rank, size, job_id))
        extra[RESULT_DIR_ENV] = folder
        extra[DEADLINE_ENV] = str(timeout)
        extra.update(env or {})
        extra.update(rank_env(rank) if rank_env else {})
        out = os.path.join(folder, "out.%d" % rank)
        err = os.path.join(folder, "err.%d" % rank)
        processes.append((rank, _spawn(_rank_argv(target, args), clean_env(extra), out, err),
                          out, err))
      deadline = time.monotonic() + timeout + 5  # the ranks' own watchdog fires first
      results = []
      for rank, process, out, err in processes:
        timed_out = False
        try:
          process.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
          timed_out = True
        code = _stop(process, 5)
        if timed_out:
          code = None
        results.append(RankResult(rank, code, _read(out), _read(err),
                                  _result_value(folder, rank), timed_out))
      return results
    finally:
      for _, process, _, _ in processes:
        _stop(process, 5)


def check_ranks(results, what="ranks"):
  """Raises AssertionError with every rank's output unless all ranks exited 0."""
  if all(r.ok for r in results):
    return
  failed = [str(r.rank) for r in results if not r.ok]
  raise AssertionError("%s failed: rank(s) %s\n%s" % (what, ", ".join(failed),
                                                      "\n".join(r.describe() for r in results)))


class LaunchResult:
  """How `ringsync launch` ended: returncode (None if killed at the timeout), its output
  (lines prefixed '[rank R] '), and each rank's returned value by global rank."""

  def __init__(self, returncode, stdout, stderr, values, timed_out):
    self.returncode = returncode
    self.stdout = stdout
    self.stderr = stderr
    self.values = values
    self.timed_out = timed_out

  def check(self):
    if self.returncode != 0 or self.timed_out:
      raise AssertionError("ringsync launch %s\nstdout:\n%s\nstderr:\n%s" % (
          "timed out" if self.timed_out else "exited %s" % self.returncode, self.stdout,
          self.stderr))


def launch(target, nodes, slots, args=(), job_id=None, timeout=120, daemon_args=(), env=None):
  """Runs target (as for run_ranks) under `ringsync launch --nodes N --slots L`: N daemons on
  this machine, N*L ranks. The launcher's own --timeout is `timeout`; this waits a little
  longer, then kills it. Returns a LaunchResult."""
  with tempfile.TemporaryDirectory(prefix="ringsync-pylaunch-") as folder:
    argv = [binary("ringsync"), "launch", "--nodes", str(nodes), "--slots", str(slots),
            "--timeout", "%ds" % timeout, "--stop-grace", "5s"]
    if job_id:
      argv += ["--job-id", job_id]
    for arg in daemon_args:
      argv += ["--daemon-arg", arg]
    argv += ["--"] + _rank_argv(target, args)
    extra = {RESULT_DIR_ENV: folder, DEADLINE_ENV: str(timeout)}
    extra.update(env or {})
    out, err = os.path.join(folder, "launch.out"), os.path.join(folder, "launch.err")
    process = _spawn(argv, clean_env(extra), out, err)
    timed_out = False
    try:
      process.wait(timeout + 30)
    except subprocess.TimeoutExpired:
      timed_out = True
    code = _stop(process, 15)
    values = {rank: _result_value(folder, rank) for rank in range(nodes * slots)}
    return LaunchResult(None if timed_out else code, _read(out), _read(err), values, timed_out)


# ---- the rank side ---------------------------------------------------------------------------

def _rank_id():
  return os.environ.get("RINGSYNC_RANK") or os.environ.get("RINGSYNC_LOCAL_RANK") or "0"


def _call(target, args):
  """Runs MODULE:FUNCTION(*args) in a rank process; writes its return value as JSON."""
  deadline = float(os.environ.get(DEADLINE_ENV, "300"))
  # A hung rank shows where it hangs, then exits, before the test gives up on it.
  faulthandler.dump_traceback_later(deadline, exit=True)
  module_name, _, function_name = target.partition(":")
  function = getattr(importlib.import_module(module_name), function_name)
  value = function(*args)
  folder = os.environ.get(RESULT_DIR_ENV)
  if folder:
    path = os.path.join(folder, "rank-%s.json" % _rank_id())
    with open(path + ".tmp", "w") as f:
      json.dump(value, f)
    os.replace(path + ".tmp", path)


def main(argv):
  if len(argv) < 2 or argv[0] != "call":
    sys.stderr.write("usage: harness.py call MODULE:FUNCTION [JSON-ARGS]\n")
    return 2
  sys.path.insert(0, HERE)
  try:
    _call(argv[1], json.loads(argv[2]) if len(argv) > 2 else [])
  except SystemExit as e:
    return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
  except BaseException:  # noqa: B902 - a failed check ends the rank with its traceback
    traceback.print_exc()
    sys.stderr.flush()
    return 1
  sys.stdout.flush()
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
