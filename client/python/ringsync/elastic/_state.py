"""State objects: what a training loop needs to resume, committed every step."""

import io
import os
import pickle
import struct
import tempfile

_HEADER = struct.Struct("<8sQQ")  # magic, commit count, bytes of the pickled values
_MAGIC = b"rselast2"


class State:
  """A training loop's state: committed (commit()), put back (restore()), made the same on
  every rank (sync()).

  Values given as keyword arguments (step=0, epoch=0, ...) are attributes of the state and
  are committed with it. Subclasses say how the rest is saved (_save, _load).

  name: what the daemon keeps the commits under (one per rank and name).
  keep_in_daemon: also keep each commit in the node's ringsyncd (needs ringsync.init()).
  durable_dir: a folder where every `durable_every`-th commit is also written (atomically,
  one file per rank), for a restart of the whole job; None: no disk writes.
  grow: in an elastic job (RINGSYNC_MAX_NODES set), every commit asks whether nodes wait to
  join and, when one does, all ranks end the run at that commit together (MembershipChange),
  so that @run starts the next one with them, losing no step.
  """

  def __init__(self, name="ringsync.elastic", keep_in_daemon=True, durable_dir=None,
               durable_every=1, grow=True, **values):
    object.__setattr__(self, "_values", dict(values))
    self._name = name
    self._keep_in_daemon = keep_in_daemon
    self._durable_dir = durable_dir
    self._durable_every = max(1, int(durable_every))
    self._grow = grow
    self._committed = None   # bytes of the last commit
    self.commits = 0         # commits made (or adopted from another rank by sync())
    self.resets = 0          # failures this rank has recovered from
    self.steps_lost = 0      # commits rolled back, plus the step each reset interrupted
    self._reset_callbacks = []

  # -- values ---------------------------------------------------------------------------------

  def __getattr__(self, key):
    values = object.__getattribute__(self, "_values")
    if key in values:
      return values[key]
    raise AttributeError("%s has no attribute %r" % (type(self).__name__, key))

  def __setattr__(self, key, value):
    if key in self._values:
      self._values[key] = value
    else:
      object.__setattr__(self, key, value)

  # -- what subclasses provide ----------------------------------------------------------------

  def _save(self):
    """Everything but the values, as bytes (b"" when there is nothing else)."""
    return b""

  def _load(self, data):
    """Puts back what _save returned (`data`: a bytes-like object)."""

  # -- commits --------------------------------------------------------------------------------

  def commit(self):
    """Snapshots the state: restore() comes back to it, and sync() hands it to new ranks."""
    self.commits += 1
    self._committed = self._snapshot()
    if self._keep_in_daemon:
      from .. import _context, _kept
      if _context.is_initialized():
        _kept.keep_state(self._name, self._committed)
    if self._durable_dir is not None and self.commits % self._durable_every == 0:
      self._write_durable(self._committed)
    self._end_run_if_nodes_wait()

  def _end_run_if_nodes_wait(self):
    """Elastic jobs: at this commit, do nodes wait to join? The ranks learn of them at
    different moments, so they agree first (the most any rank saw); then all of them end
    the run here, at the same step."""
    if not self._grow or not os.environ.get("RINGSYNC_MAX_NODES"):
      return
    from .. import _context, _kept
    if not _context.is_initialized():
      return
    import numpy as np
    import ringsync as rs
    from ._run import MembershipChange
    seen = _kept.nodes_waiting()
    agreed = int(rs.allreduce(np.array([seen], dtype=np.int64), op=rs.Max, name=self._name + ".waiting")[0])
    if agreed > 0:
      raise MembershipChange("%d node(s) wait to join the job: this run ends at commit %d for them"
                             % (agreed, self.commits))

  def restore(self):
    """Puts the state back to its last commit (nothing happens before the first)."""
    if self._committed is not None:
      self._apply(self._committed)

  def on_reset(self, callback):
    """Registers callback(state) to run after every reset, once the state is synced (e.g. to
    rescale the learning rate to the new size(), or re-shard the data)."""
    self._reset_callbacks.append(callback)
    return callback

  def load_kept(self):
    """Adopts the commit this rank's ringsyncd (or, failing that, the durable folder) kept,
    if it is newer than this state's own: how a restarted trainer resumes. Returns whether it
    did. @run calls it once, at the first entry."""
    data = None
    if self._keep_in_daemon:
      from .. import _context, _kept
      if _context.is_initialized():
        data = _kept.fetch_state(self._name)
    if data is None and self._durable_dir is not None:
      path = self._durable_path()
      if os.path.exists(path):
        with open(path, "rb") as f:
          data = f.read()
    if data is None or _count_of(data) <= self.commits:
      return False
    self._apply(data)
    return True

  def sync(self):
    """Makes every rank's state the newest commit any rank holds (the lowest such rank sends
    it); before any commit, rank 0's current state. Call it on every rank together."""
    import numpy as np
    import ringsync as rs
    counts = rs.allgather(np.array([self.commits], dtype=np.int64), name=self._name + ".commits")
    newest = int(counts.max())
    root = int(np.argmax(counts))  # the lowest rank holding the newest commit
    if rs.rank() == root:
      data = self._committed if self._committed is not None and newest > 0 else self._snapshot()
    else:
      data = b""
    length = int(rs.allreduce(np.array([len(data)], dtype=np.int64), op=rs.Max,
                              name=self._name + ".length")[0])
    payload = np.frombuffer(data, dtype=np.uint8).copy() if data else np.zeros(length, np.uint8)
    payload = rs.broadcast(payload, root=root, name=self._name + ".state")
    self._apply(payload.tobytes())
    return root

  # -- inside ---------------------------------------------------------------------------------

  def _snapshot(self):
    values = pickle.dumps(self._values, protocol=pickle.HIGHEST_PROTOCOL)
    return b"".join((_HEADER.pack(_MAGIC, self.commits, len(values)), values, self._save()))

  def _apply(self, data):
    data = bytes(data)
    magic, commits, values_bytes = _HEADER.unpack_from(data, 0)
    if magic != _MAGIC:
      raise ValueError("not a ringsync.elastic commit")
    start = _HEADER.size
    values = pickle.loads(data[start:start + values_bytes])
    self._load(memoryview(data)[start + values_bytes:])
    self._values.clear()
    self._values.update(values)
    self.commits = commits
    self._committed = data

  def _durable_path(self):
    import ringsync as rs
    from .. import _context
    rank = rs.rank() if _context.is_initialized() else 0
    return os.path.join(self._durable_dir, "%s.rank%d" % (self._name, rank))

  def _write_durable(self, data):
    os.makedirs(self._durable_dir, exist_ok=True)
    path = self._durable_path()
    fd, tmp = tempfile.mkstemp(dir=self._durable_dir, prefix=".commit.")
    try:
      with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
      os.replace(tmp, path)  # a reader sees the old commit or the new one, never half
    except BaseException:
      if os.path.exists(tmp):
        os.unlink(tmp)
      raise


def _count_of(data):
  magic, commits, _ = _HEADER.unpack_from(data, 0)
  return commits if magic == _MAGIC else -1


class ObjectState(State):
  """A state made of picklable values only: ObjectState(step=0, weights=numpy_array, ...)."""


class TorchState(State):
  """A PyTorch model and optimizer (either may be None), and picklable values:
  TorchState(model, optimizer, step=0, epoch=0). Commits copy the parameters, buffers and
  optimizer state to host memory (torch.save into memory); restore() loads them back into
  the same model and optimizer objects."""

  def __init__(self, model=None, optimizer=None, **kwargs):
    super().__init__(**kwargs)
    self.model = model
    self.optimizer = optimizer

  def _save(self):
    import torch
    out = io.BytesIO()
    torch.save({"model": self.model.state_dict() if self.model is not None else None,
                "optimizer": self.optimizer.state_dict() if self.optimizer is not None else None},
               out)
    return out.getvalue()

  def _load(self, data):
    import torch
    try:
      saved = torch.load(io.BytesIO(data), map_location="cpu", weights_only=False)
    except TypeError:  # torch before 1.13 has no weights_only
      saved = torch.load(io.BytesIO(data), map_location="cpu")
    if self.model is not None and saved["model"] is not None:
      self.model.load_state_dict(saved["model"])
    if self.optimizer is not None and saved["optimizer"] is not None:
      self.optimizer.load_state_dict(saved["optimizer"])
