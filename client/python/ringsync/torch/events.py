"""What DistributedOptimizer did, in order, for each step: so overlap can be checked from the
order of events instead of from clocks."""

import collections

Event = collections.namedtuple("Event", ["kind", "name"])
Event.__doc__ = """One thing DistributedOptimizer did. ``kind``:

- ``"hook"``: the gradient of parameter ``name`` was accumulated (one per backward pass);
- ``"allreduce"``: bucket ``name`` was complete during backward and its allreduce started;
- ``"backward_end"``: a backward pass finished (autograd's end-of-pass callback);
- ``"allreduce_at_sync"``: bucket ``name`` started in synchronize(), because some of its
  parameters got no gradient (or fewer than backward_passes_per_step passes ran);
- ``"synchronize"``: every bucket was reduced and written back into ``p.grad``;
- ``"step"``: the wrapped optimizer's step() ran; this ends the step's record.
"""


class EventLog:
  """The events of the current step and of the last ``keep`` finished steps.

  ``steps`` is a list of finished steps (oldest first), each a list of Event; ``current`` the
  events since the last step(). A step that never ends keeps at most ``max_events`` events.
  """

  def __init__(self, keep=16, max_events=100000):
    self._finished = collections.deque(maxlen=keep)
    self._current = []
    self._max_events = max_events

  def record(self, kind, name=None):
    if len(self._current) < self._max_events:
      self._current.append(Event(kind, name))

  def end_step(self):
    self._finished.append(self._current)
    self._current = []

  @property
  def steps(self):
    return list(self._finished)

  @property
  def current(self):
    return list(self._current)

  def clear(self):
    self._finished.clear()
    self._current = []
