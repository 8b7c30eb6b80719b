"""ctypes declarations of the C ABI (ringsync/ringsync.h), and status checking.

Every C call returns an rs_status_t; on failure rs_last_error() holds the message for the
calling thread until its next failing call. `call` reads it before this thread can call the
library again: garbage-collection finalizers (which free buffers) check `in_call()` and leave
their frees for later while a call's message is still to be read.
ctypes releases the GIL during each call, so a blocking wait does not stop other threads.
"""

import ctypes
import threading

from . import _library
from .errors import IN_PROGRESS, SUCCESS, LibraryNotFoundError, RingsyncError, status_name

c_ctx_p = ctypes.c_void_p  # rs_context_t*
c_req_p = ctypes.c_void_p  # rs_request_t*
c_status = ctypes.c_int


class Config(ctypes.Structure):
  """rs_config_t."""
  _fields_ = [
      ("socket_path", ctypes.c_char_p),
      ("job_id", ctypes.c_char_p),
      ("local_rank", ctypes.c_int),
      ("local_size", ctypes.c_int),
      ("connect_timeout_ms", ctypes.c_int),
  ]


# name: (restype, argtypes)
_SIGNATURES = {
    "rs_config_init": (None, [ctypes.POINTER(Config)]),
    "rs_status_string": (ctypes.c_char_p, [c_status]),
    "rs_last_error": (ctypes.c_char_p, []),
    "rs_dtype_size": (ctypes.c_size_t, [ctypes.c_int]),
    "rs_connect": (c_status, [ctypes.POINTER(Config), ctypes.POINTER(c_ctx_p)]),
    "rs_disconnect": (None, [c_ctx_p]),
    "rs_local_rank": (ctypes.c_int, [c_ctx_p]),
    "rs_local_size": (ctypes.c_int, [c_ctx_p]),
    "rs_rank": (ctypes.c_int, [c_ctx_p]),
    "rs_size": (ctypes.c_int, [c_ctx_p]),
    "rs_node_rank": (ctypes.c_int, [c_ctx_p]),
    "rs_num_nodes": (ctypes.c_int, [c_ctx_p]),
    "rs_alloc": (c_status, [c_ctx_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)]),
    "rs_free": (c_status, [c_ctx_p, ctypes.c_void_p]),
    "rs_keep_state": (c_status, [c_ctx_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]),
    "rs_fetch_state": (c_status, [c_ctx_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p),
                                  ctypes.POINTER(ctypes.c_size_t)]),
    "rs_nodes_waiting": (c_status, [c_ctx_p, ctypes.POINTER(ctypes.c_int)]),
    "rs_allreduce_async": (c_status, [c_ctx_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p,
                                      ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                                      ctypes.POINTER(c_req_p)]),
    "rs_broadcast_async": (c_status, [c_ctx_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p,
                                      ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                                      ctypes.POINTER(c_req_p)]),
    "rs_allgather_async": (c_status, [c_ctx_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p,
                                      ctypes.c_size_t, ctypes.c_int, ctypes.POINTER(c_req_p)]),
    "rs_reduce_scatter_async": (c_status, [c_ctx_p, ctypes.c_char_p, ctypes.c_void_p,
                                           ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                           ctypes.c_int, ctypes.POINTER(c_req_p)]),
    "rs_alltoall_async": (c_status, [c_ctx_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p,
                                     ctypes.c_size_t, ctypes.c_int, ctypes.POINTER(c_req_p)]),
    "rs_reduce_async": (c_status, [c_ctx_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p,
                                   ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                   ctypes.POINTER(c_req_p)]),
    "rs_gather_async": (c_status, [c_ctx_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p,
                                   ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                                   ctypes.POINTER(c_req_p)]),
    "rs_scatter_async": (c_status, [c_ctx_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p,
                                    ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                                    ctypes.POINTER(c_req_p)]),
    "rs_barrier_async": (c_status, [c_ctx_p, ctypes.c_char_p, ctypes.POINTER(c_req_p)]),
    "rs_wait": (c_status, [c_req_p]),
    "rs_wait_timeout": (c_status, [c_req_p, ctypes.c_int]),
    "rs_test": (c_status, [c_req_p]),
    "rs_request_free": (None, [c_req_p]),
    "rs_register_device": (c_status, [c_ctx_p, ctypes.c_void_p, ctypes.c_size_t]),
    "rs_unregister_device": (c_status, [c_ctx_p, ctypes.c_void_p]),
    "rs_set_device_stream": (c_status, [c_ctx_p, ctypes.c_void_p]),
    "rs_is_device_pointer": (ctypes.c_int, [ctypes.c_void_p]),
}

_lock = threading.Lock()
_lib = None


def lib():
  """The loaded library with every function declared (loads it on first use)."""
  global _lib
  if _lib is not None:
    return _lib
  with _lock:
    if _lib is None:
      handle, path = _library.load()
      for name, (restype, argtypes) in _SIGNATURES.items():
        try:
          fn = getattr(handle, name)
        except AttributeError:
          raise LibraryNotFoundError(
              "%s has no function %s: it is older than this Python package; use the library "
              "built from the same sources (set RINGSYNC_LIBRARY)" % (path, name)) from None
        fn.restype = restype
        fn.argtypes = argtypes
      _lib = handle
  return _lib


_calling = threading.local()  # depth: > 0 between a C call and the read of its message


def in_call():
  """True while this thread is between a C call and the read of its rs_last_error()."""
  return getattr(_calling, "depth", 0) > 0


def last_error():
  """rs_last_error() of this thread, decoded."""
  raw = lib().rs_last_error()
  return raw.decode("utf-8", "replace") if raw else ""


def error(code):
  """A RingsyncError for a failed call's status, with this thread's rs_last_error()."""
  message = last_error()
  if not message:
    message = lib().rs_status_string(code).decode("utf-8", "replace")
  return RingsyncError(status_name(code), message)


def call(function, *args):
  """function(*args) for a C function returning rs_status_t: returns RS_SUCCESS (or
  RS_IN_PROGRESS, from rs_test and rs_wait_timeout), else raises RingsyncError carrying the
  message the call left in rs_last_error()."""
  _calling.depth = getattr(_calling, "depth", 0) + 1
  try:
    code = function(*args)
    if code == SUCCESS or code == IN_PROGRESS:
      return code
    raise error(code)
  finally:
    _calling.depth -= 1
