"""Tensor names: the daemon matches a collective across ranks by its name.

Without an explicit name a collective takes the next automatic name of its kind
("auto.allreduce.0", "auto.allreduce.1", ...), counted per process, so every rank must then
call the unnamed collectives of each kind in the same order (as in Horovod). The counters
restart at every init().
"""

import itertools
import threading

_lock = threading.Lock()
_counters = {}


def reset():
  with _lock:
    _counters.clear()


def resolve(kind, name):
  """The name to send, as bytes: `name` encoded, or the next automatic name of `kind`."""
  if name is None:
    with _lock:
      counter = _counters.setdefault(kind, itertools.count())
      name = "auto.%s.%d" % (kind, next(counter))
  elif not isinstance(name, str):
    raise TypeError("name must be a str (or None for an automatic name), not %s"
                    % type(name).__name__)
  return name.encode("utf-8")
