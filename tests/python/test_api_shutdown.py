"""shutdown() while other threads use the connection: it must never free the C context under a
running call (that crashed the process), must not hang, and must keep the results of
collectives that completed; plus a failed call's message surviving a finalizer that runs
before it is read."""

import unittest

import harness


def _maps_line(address):
  with open("/proc/self/maps") as maps:
    for line in maps:
      low, high = (int(v, 16) for v in line.split()[0].split("-"))
      if low <= address < high:
        return line.split()
  return []


def rank_shutdown_races_collectives(rounds):
  """Worker threads loop collectives (staged and zero copy), allocations and dropped arrays
  while the main thread shuts down and connects again, `rounds` times."""
  import threading
  import numpy as np
  import ringsync as rs

  stop = threading.Event()
  connected = threading.Event()
  progress = threading.Condition()
  ops = [0, 0, 0]
  failures = []
  completed = []  # (output, expected) of zero-copy collectives reported successful
  # Arrays from rs.empty() must not be touched while shutdown() remaps them (docs/python.md):
  # the workers write theirs under this lock, the main thread shuts down under it. The calls
  # into the library race with shutdown() freely.
  touch = threading.Lock()
  expected_errors = ("NOT_INITIALIZED", "CLOSED")

  def count(worker):
    with progress:
      ops[worker] += 1
      progress.notify_all()

  def loop(worker, body):
    i = 0
    while not stop.is_set():
      connected.wait(1)
      try:
        body(i)
        count(worker)
      except rs.RingsyncError as e:
        if e.status not in expected_errors:
          failures.append("worker %d: %r" % (worker, e))
          return
      except BaseException as e:  # noqa: B902 - reported by the main thread
        failures.append("worker %d: %r" % (worker, e))
        return
      i += 1

  def staged(i):
    x = np.full(64, float(i), np.float32)
    got = rs.allreduce(x, name="staged.%d" % (i % 16))
    assert (got == x).all(), got[:4]

  def zero_copy(i):
    a = rs.empty((256,), "float32")
    b = rs.empty((256,), "float32")
    with touch:
      a[:] = i + 1
      b[:] = -1
    handle = rs.allreduce_async(a, out=b, name="zc.%d" % (i % 16))
    handle.wait()  # successful: b must hold the result, also once shutdown moved it
    completed.append((b, float(i + 1)))

  def churn(i):
    buffers = [rs.empty((1024,), "uint8") for _ in range(4)]
    del buffers  # finalizers free them, racing with shutdown
    rs.barrier(name="churn.%d" % (i % 16))

  threads = [threading.Thread(target=loop, args=(w, body), daemon=True)
             for w, body in enumerate((staged, zero_copy, churn))]
  rs.init()
  connected.set()
  for t in threads:
    t.start()
  for round_ in range(rounds):
    if round_:
      rs.init()
      connected.set()
    if round_ % 2 == 0:
      # Let every worker get something done on this connection (bounded: go on regardless).
      with progress:
        start = list(ops)
        progress.wait_for(lambda: all(ops[w] > start[w] for w in range(3)) or failures,
                          timeout=30)
    connected.clear()
    with touch:
      rs.shutdown()  # on odd rounds at once: calls are in flight
    assert not rs.is_initialized()
    _check_completed(completed)
    assert not failures, failures
  stop.set()
  connected.set()
  for t in threads:
    t.join(60)
  assert not any(t.is_alive() for t in threads), "a worker is stuck"
  assert not failures, failures
  _check_completed(completed)
  return ops


def _check_completed(completed):
  """Zero-copy collectives that reported success hold their result, in memory shutdown() moved
  to this process (not the contents from before they completed)."""
  for output, value in list(completed):
    assert (output == value).all(), "a completed collective's result was lost: %r, want %r" % (
        output[:4], value)
  del completed[:]


def rank_shutdown_waits_for_calls_in_flight():
  """A call inside the library (a held use of the connection) holds shutdown() back; with no
  time left to wait, the last call to return disconnects."""
  import threading
  import time
  import warnings
  import numpy as np
  import ringsync as rs
  from ringsync import _context

  # shutdown() waits while a call is in flight, and disconnects once it returns.
  rs.init()
  kept = rs.empty((1000,), "int64")
  kept[:] = np.arange(1000)
  address = kept.__array_interface__["data"][0]
  use = _context.use()
  use.__enter__()
  finished = threading.Event()
  shutter = threading.Thread(target=lambda: (rs.shutdown(), finished.set()))
  shutter.start()
  for _ in range(6000):  # until shutdown() has begun (bounded)
    if not rs.is_initialized():
      break
    time.sleep(0.01)
  try:
    rs.barrier(name="refused")
    raise AssertionError("a collective was submitted during shutdown()")
  except rs.RingsyncError as e:
    assert e.status == "NOT_INITIALIZED", e
  assert not finished.wait(0.2), "shutdown() returned while a call was in flight"
  assert _maps_line(address)[1].endswith("s"), "disconnected under a call in flight"
  use.__exit__(None, None, None)
  assert finished.wait(60), "shutdown() did not return after the call did"
  shutter.join(60)
  assert _maps_line(address)[1].endswith("p"), _maps_line(address)
  assert (kept == np.arange(1000)).all()

  # No time to wait: shutdown() warns and returns; the last call disconnects.
  rs.init()
  kept = rs.empty((10,), "float64")
  kept[:] = 2.5
  address = kept.__array_interface__["data"][0]
  use = _context.use()
  use.__enter__()
  saved, _context.DRAIN_TIMEOUT_S = _context.DRAIN_TIMEOUT_S, 0.0
  try:
    with warnings.catch_warnings(record=True) as caught:
      warnings.simplefilter("always")
      rs.shutdown()
  finally:
    _context.DRAIN_TIMEOUT_S = saved
  assert any("did not return" in str(w.message) for w in caught), [str(w.message)
                                                                    for w in caught]
  assert not rs.is_initialized()
  assert _maps_line(address)[1].endswith("s"), "disconnected under a call in flight"
  use.__exit__(None, None, None)
  assert _maps_line(address)[1].endswith("p"), _maps_line(address)
  assert (kept == 2.5).all()
  rs.init(job_id="after", local_rank=0, local_size=1)
  assert rs.allreduce(np.ones(3), name="again").tolist() == [1, 1, 1]
  rs.shutdown()
  return "ok"


def rank_error_message_survives_finalizers():
  """A finalizer that runs between a failed call and the read of its message (here: the last
  array of a buffer a pending collective pins, whose rs_free() fails) leaves the message
  alone."""
  import ctypes
  import numpy as np
  import ringsync as rs
  from ringsync import _capi, _context

  rs.init()  # local size 2; rank 1 never comes, so collectives stay pending
  lib = _capi.lib()

  def bad_call(connection):
    request = _capi.c_req_p()
    return lib.rs_allreduce_async(connection.ctx, b"bad.dtype", None, None, 4, 99, 0,
                                  ctypes.byref(request))

  with _context.use() as connection:
    try:
      _capi.call(bad_call, connection)
      raise AssertionError("a bad dtype was accepted")
    except rs.RingsyncError as e:
      clean = e.message
  pinned = rs.empty((16,), "float32")
  address = pinned.__array_interface__["data"][0]
  holder = [rs.allreduce_async(pinned, out=pinned, name="pins.the.buffer")]
  del pinned

  def failing_then_finalizer(connection):
    code = bad_call(connection)
    del holder[:]  # the handle and the last array go: the buffer's finalizer runs here
    return code

  with _context.use() as connection:
    try:
      _capi.call(failing_then_finalizer, connection)
      raise AssertionError("a bad dtype was accepted")
    except rs.RingsyncError as e:
      assert e.status == "INVALID_ARGUMENT" and e.message == clean, (e, clean)
    assert address in connection.buffers._to_free, "the free was not left for later"
  rs.shutdown()
  assert np.float32  # numpy was importable throughout
  return "ok"


class ShutdownTest(unittest.TestCase):

  def test_shutdown_while_other_threads_run_collectives(self):
    with harness.Daemon(log_level="warn") as daemon:
      results = harness.run_ranks(daemon, 1, "test_api_shutdown:rank_shutdown_races_collectives",
                                  args=[40], timeout=240)
    harness.check_ranks(results)

  def test_shutdown_waits_for_calls_in_flight(self):
    with harness.Daemon() as daemon:
      results = harness.run_ranks(daemon, 1,
                                  "test_api_shutdown:rank_shutdown_waits_for_calls_in_flight",
                                  timeout=120)
    harness.check_ranks(results)

  def test_error_message_survives_finalizers(self):
    with harness.Daemon() as daemon:
      results = harness.run_ranks(daemon, 1,
                                  "test_api_shutdown:rank_error_message_survives_finalizers",
                                  timeout=120, env={"RINGSYNC_LOCAL_SIZE": "2"})
    harness.check_ranks(results)


if __name__ == "__main__":
  unittest.main()
