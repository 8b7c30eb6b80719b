"""Finds and loads libringsync.so, the C library this package wraps.

Search order (the first that exists wins; see docs/python.md):
  1. $RINGSYNC_LIBRARY: the library file, or a folder holding it. When set, nothing else is
     tried, so a wrong value is an error rather than a silent fallback to another build.
  2. Next to this package (a copy ``pip install`` can carry): ringsync/libringsync.so[.0].
  3. The build tree of the repository this package lives in: <repo>/build/lib/.
  4. The system loader (LD_LIBRARY_PATH, the ldconfig cache, rpaths): libringsync.so.0.
"""

import ctypes
import os
import threading

from .errors import LibraryNotFoundError

ENV_VAR = "RINGSYNC_LIBRARY"
FILE_NAMES = ("libringsync.so", "libringsync.so.0")

_lock = threading.Lock()
_loaded = None  # (ctypes.CDLL, path) once loaded


def _package_dir():
  return os.path.dirname(os.path.abspath(__file__))


def _repo_build_dir():
  # client/python/ringsync -> the repository root, then its default build folder.
  repo = os.path.dirname(os.path.dirname(os.path.dirname(_package_dir())))
  return os.path.join(repo, "build", "lib")


def _files_in(folder):
  return [os.path.join(folder, name) for name in FILE_NAMES]


def candidates():
  """[(description, path or soname)] in search order, for the current environment."""
  explicit = os.environ.get(ENV_VAR, "")
  if explicit:
    if os.path.isdir(explicit):
      return [("$%s" % ENV_VAR, p) for p in _files_in(explicit)]
    return [("$%s" % ENV_VAR, explicit)]
  found = [("next to the package", p) for p in _files_in(_package_dir())]
  found += [("the repository's build tree", p) for p in _files_in(_repo_build_dir())]
  found += [("the system loader", "libringsync.so.0"), ("the system loader", "libringsync.so")]
  return found


def _try_load(path):
  """(CDLL, None) or (None, why it failed)."""
  is_file_path = os.sep in path
  if is_file_path and not os.path.exists(path):
    return None, "not found"
  try:
    return ctypes.CDLL(path), None
  except OSError as e:
    return None, str(e)


def _mapped_path(soname):
  """Where the system loader found `soname` (from /proc/self/maps), else the soname itself."""
  try:
    with open("/proc/self/maps") as maps:
      for line in maps:
        path = line.split(None, 5)[-1].strip()
        if os.path.basename(path).startswith("libringsync.so"):
          return path
  except OSError:
    pass
  return soname


def _not_found(tried):
  lines = ["cannot load libringsync.so, the ringsync client library. Tried:"]
  for where, path, why in tried:
    lines.append("  %s (%s): %s" % (path, where, why))
  if os.environ.get(ENV_VAR):
    lines.append("$%s names a library that cannot be loaded: point it at libringsync.so (or "
                 "its folder), or unset it to search the usual places." % ENV_VAR)
  else:
    lines.append("  ($%s is not set)" % ENV_VAR)
    lines.append("Build the project (cmake --build build) and set %s to the built "
                 "build/lib/libringsync.so, or put the library where the system loader finds "
                 "it (LD_LIBRARY_PATH)." % ENV_VAR)
  return LibraryNotFoundError("\n".join(lines))


def load():
  """(ctypes.CDLL, path) of libringsync.so, loaded once per process.

  Raises LibraryNotFoundError (also an ImportError) listing every place tried.
  """
  global _loaded
  with _lock:
    if _loaded is not None:
      return _loaded
    tried = []
    for where, path in candidates():
      lib, why = _try_load(path)
      if lib is not None:
        _loaded = (lib, os.path.abspath(path) if os.sep in path else _mapped_path(path))
        return _loaded
      tried.append((where, path, why))
    raise _not_found(tried)
