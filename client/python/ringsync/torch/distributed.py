"""torch.distributed's "ringsync" backend: DDP, ZeRO and other torch.distributed code on ringsync.

    import torch.distributed as dist
    import ringsync.torch                 # registers the backend (or ringsync.torch.register())
    dist.init_process_group("ringsync")   # under `ringsync launch`, torchrun, ...
    model = torch.nn.parallel.DistributedDataParallel(model)
    ...
    dist.destroy_process_group()          # before ringsync.shutdown(), if you call it

The process group is a C++ c10d::ProcessGroup (client/torch/, the extension module
_ringsync_torch) over libringsync's C ABI, on the connection of ``ringsync.init()`` (called
here when it was not): a process holds one connection per rank. It spans every rank of the
ringsync job; torch's rank and world size must be ringsync's (docs/pytorch.md lists the
calls it supports).

The group holds a use of the connection for its life, so ``ringsync.shutdown()`` while the
group lives waits for it (up to ringsync's drain timeout) and leaves the disconnect to the
group's end. At exit the groups still alive are closed first (their pending collectives get
a few seconds), then ringsync disconnects.

The extension is found like libringsync.so (see ringsync/_library.py), the first that exists:
  1. $RINGSYNC_TORCH_EXTENSION: the module file, or a folder holding it (nothing else then).
  2. The folder of the libringsync.so this process uses (a build tree's lib/, where CMake puts
     both; or next to the package, for a copy pip carries).
  3. Next to this package (ringsync/).
"""

import atexit
import ctypes
import importlib.machinery
import importlib.util
import os
import threading

BACKEND = "ringsync"
MODULE_NAME = "_ringsync_torch"
EXTENSION_ENV = "RINGSYNC_TORCH_EXTENSION"
# At exit: how long the groups' pending collectives may take before they are abandoned.
EXIT_DRAIN_S = 10.0

_lock = threading.Lock()
_extension = None
_atexit_registered = False


def _torch_distributed():
  """torch.distributed, or None when this torch has no distributed support."""
  import torch.distributed as dist
  return dist if dist.is_available() else None


def register():
  """Registers the "ringsync" backend with torch.distributed (done by ``import ringsync.torch``).

  Idempotent. Returns False when this torch has no distributed support (nothing to register
  with), else True. Building the extension is not needed for this: a missing one is reported
  by init_process_group("ringsync").
  """
  dist = _torch_distributed()
  if dist is None:
    return False
  with _lock:
    if BACKEND.upper() in dist.Backend._plugins:
      return True
    # extended_api: the creator learns the group's name (the same on every rank: the
    # collectives' names start with it) and its ranks.
    dist.Backend.register_backend(BACKEND, _create, extended_api=True)
  return True


def extension_candidates():
  """[(description, path)] where the extension module may be, in search order."""
  suffixes = importlib.machinery.EXTENSION_SUFFIXES
  explicit = os.environ.get(EXTENSION_ENV, "")
  if explicit:
    if os.path.isdir(explicit):
      return [("$" + EXTENSION_ENV, os.path.join(explicit, MODULE_NAME + s)) for s in suffixes]
    return [("$" + EXTENSION_ENV, explicit)]
  from ringsync import library_path
  folders = [("beside the libringsync.so in use", os.path.dirname(library_path())),
             ("next to the package",
              os.path.dirname(os.path.dirname(os.path.abspath(__file__))))]
  return [(where, os.path.join(folder, MODULE_NAME + s)) for where, folder in folders
          for s in suffixes]


def _load_from(path):
  spec = importlib.util.spec_from_file_location(MODULE_NAME, path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def _check_same_library(module, path):
  """The extension and the Python package must use one libringsync.so: the group runs on the
  package's connection."""
  from ringsync import _capi
  ours = ctypes.cast(_capi.lib().rs_rank, ctypes.c_void_p).value
  if module.rs_rank_address() != ours:
    from ringsync import library_path
    raise ImportError(
        "%s uses another libringsync.so than the ringsync package (%s); build both from one "
        "tree and load the library from its lib/ folder (RINGSYNC_LIBRARY)"
        % (path, library_path()))


def load_extension():
  """The _ringsync_torch module, loaded once. ImportError listing every place tried."""
  global _extension
  with _lock:
    if _extension is not None:
      return _extension
    tried = []
    for where, path in extension_candidates():
      if not os.path.exists(path):
        tried.append("  %s (%s): not found" % (path, where))
        continue
      module = _load_from(path)
      _check_same_library(module, path)
      _extension = module
      return module
    raise ImportError(
        "the ringsync backend needs its extension module %s, built with the project where "
        "Torch's CMake package (libtorch-dev) and pybind11 (pybind11-dev) are found. Tried:\n"
        "%s\nBuild it (cmake --build build --target ringsync_torch), or set %s to the module "
        "or its folder." % (MODULE_NAME, "\n".join(tried), EXTENSION_ENV))


def _close_all_at_exit():
  module = _extension
  if module is not None:
    module.close_all(EXIT_DRAIN_S)


def _create(options, pg_options=None):
  """torch.distributed's creator for the backend (extended API: a DistributedBackendOptions)."""
  import ringsync
  from ringsync import _context

  extension = load_extension()
  if not ringsync.is_initialized():
    ringsync.init()
  connection = _context.current()
  size = connection.ranks["size"]
  ranks = list(options.global_ranks_in_group)
  if ranks and ranks != list(range(size)):
    raise RuntimeError(
        "ringsync backend: a process group spans every rank of the ringsync job (0..%d), not "
        "ranks %s: the daemons know no subgroups. Create subgroups with another backend "
        "(dist.new_group(ranks, backend='gloo'))" % (size - 1, ranks))
  ctx = connection.acquire()  # a use of the connection for the group's life
  try:
    group = extension.create(ctx.value, options.group_rank, options.group_size,
                             str(options.group_id), connection.release)
  except BaseException:
    connection.release()
    raise
  global _atexit_registered
  with _lock:
    if not _atexit_registered:
      # After ringsync.init()'s own handler, so it runs before it (atexit is last in, first
      # out): the groups close before the connection does.
      atexit.register(_close_all_at_exit)
      _atexit_registered = True
  return group


def close(group, drain=EXIT_DRAIN_S):
  """Closes a ringsync process group now: no more collectives on it, up to `drain` seconds
  for those pending (the rest fail), and its use of the connection ends. Returns how many
  collectives were abandoned. destroy_process_group() does it when the last reference goes."""
  return load_extension().close(group, drain)


def submitted(group):
  """How many collectives the ringsync process group `group` has submitted."""
  return load_extension().submitted(group)
