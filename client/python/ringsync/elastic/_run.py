"""@run: calls a training function again, from the last commit, after the job lost a rank or
a node."""

import functools
import sys
import time

from ..errors import RingsyncError

# Failures of the job, not of this call: a rank or node went away, the ring it ran on is gone;
# or the ranks ended the run at a commit so that waiting nodes join the next.
_MEMBERSHIP_STATUSES = ("PEER_LOST", "CLOSED", "MEMBERSHIP_CHANGE")


class MembershipChange(RingsyncError):
  """Raised by State.commit() on every rank at the same commit when nodes wait to join an
  elastic job: @run starts the next run with them (nothing is lost: the state was just
  committed)."""

  def __init__(self, message):
    super().__init__("MEMBERSHIP_CHANGE", message)

  def __reduce__(self):
    return (type(self), (self.message,))


def is_membership_error(error):
  """Whether `error` says the job lost a rank or node (recoverable by @run) rather than that
  this call was wrong (a mismatch, a bad argument: those propagate)."""
  return isinstance(error, RingsyncError) and error.status in _MEMBERSHIP_STATUSES


def run(func=None, *, max_resets=None, reconnect_timeout=None):
  """Decorates train(state, *args, **kwargs) so that it survives the loss of ranks or nodes.

  At the first call: the state takes the commit this rank's daemon kept, if newer (a restarted
  trainer), and every rank is synced (State.sync). Then, whenever the function raises a
  RingsyncError saying the job lost a rank or node: the state goes back to its last commit,
  ringsync shuts down and connects again (the daemons form the job's next ring with whoever
  is there), the ranks sync, the reset callbacks run, and the function is called again.
  Other errors propagate. max_resets: give up (re-raise) after this many; None: never.
  reconnect_timeout: seconds to keep trying to connect again (default 300).
  """
  if func is None:
    return functools.partial(run, max_resets=max_resets, reconnect_timeout=reconnect_timeout)

  @functools.wraps(func)
  def wrapper(state, *args, **kwargs):
    import ringsync as rs
    if not rs.is_initialized():
      _connect(reconnect_timeout or 300.0, "starting")
    state.load_kept()
    was_reset = False
    while True:
      try:
        state.sync()
        if was_reset:
          for callback in state._reset_callbacks:
            callback(state)
          was_reset = False
        return func(state, *args, **kwargs)
      except RingsyncError as error:
        if not is_membership_error(error):
          raise
        if max_resets is not None and state.resets >= max_resets:
          raise
        _reset(state, error, reconnect_timeout or 300.0)
        was_reset = True

  return wrapper


def _reset(state, error, reconnect_timeout):
  import ringsync as rs
  before = state.commits
  state.restore()
  state.resets += 1
  if not isinstance(error, MembershipChange):  # a planned end costs nothing: it follows a commit
    state.steps_lost += 1 + max(0, before - state.commits)
  print("ringsync.elastic: %s; back to commit %d, connecting again (reset %d)"
        % (error, state.commits, state.resets), file=sys.stderr, flush=True)
  rs.shutdown()
  _connect(reconnect_timeout, "after '%s'" % error)
  # A restarted trainer of this rank may have left a newer commit with the daemon.
  state.load_kept()


def _connect(timeout, when):
  """ringsync.init(), again while the daemon says the job's last run is still ending (or the
  daemon is not there yet), for up to `timeout` seconds."""
  import ringsync as rs
  deadline = time.monotonic() + timeout
  while True:
    try:
      rs.init()
      return
    except RingsyncError as again:
      if not is_membership_error(again):
        raise
      if time.monotonic() > deadline:
        raise RingsyncError(again.status, "ringsync.elastic: could not connect %s within %.0f s: %s"
                            % (when, timeout, again.message)) from again
      time.sleep(0.2)
