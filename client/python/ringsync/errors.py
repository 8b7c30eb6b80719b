"""The exception a failed ringsync call raises, and the library's status codes."""

# rs_status_t in ringsync/ringsync.h, by value.
STATUS_NAMES = (
    "SUCCESS",
    "INVALID_ARGUMENT",
    "MISMATCH",
    "PEER_LOST",
    "TIMEOUT",
    "PROTOCOL_ERROR",
    "OUT_OF_MEMORY",
    "CLOSED",
    "INTERNAL",
    "IN_PROGRESS",
)
SUCCESS = 0
IN_PROGRESS = 9


def status_name(code):
  """'MISMATCH' for 2, ...; 'UNKNOWN_<n>' for a code this package does not know."""
  if 0 <= code < len(STATUS_NAMES):
    return STATUS_NAMES[code]
  return "UNKNOWN_%d" % code


class RingsyncError(RuntimeError):
  """A ringsync call failed.

  ``status`` names the failure as the C library does ("MISMATCH", "PEER_LOST", "TIMEOUT",
  "CLOSED", "INVALID_ARGUMENT", ...) or, for failures found in Python before the library is
  called, "NOT_INITIALIZED", "LIBRARY_NOT_FOUND" or "UNSUPPORTED". ``message`` is the
  library's (for collectives: the daemon's) explanation, e.g. "local ranks disagree on tensor
  'grad.w': count: local rank 0 says 4, local rank 1 says 5".
  """

  def __init__(self, status, message):
    self.status = status
    self.message = message
    super().__init__("%s: %s" % (status.lower().replace("_", " "), message))

  def __reduce__(self):  # picklable, e.g. across multiprocessing
    return (type(self), (self.status, self.message))


class LibraryNotFoundError(RingsyncError, ImportError):
  """libringsync.so could not be found or loaded; the message lists every place tried.

  Also an ImportError, so ``except ImportError`` around an optional ringsync works.
  """

  def __init__(self, message):
    RingsyncError.__init__(self, "LIBRARY_NOT_FOUND", message)

  def __reduce__(self):
    return (type(self), (self.message,))
