"""Element types: numpy and torch dtypes to rs_dtype_t, and back.

numpy has no bfloat16, so bfloat16 is torch only. Neither numpy nor torch is imported here
until a caller needs it: numpy is optional (torch users), torch is optional and slow to import.
"""

import sys

# rs_dtype_t by canonical name, in the header's order.
CODES = {
    "float32": 0,
    "float64": 1,
    "float16": 2,
    "bfloat16": 3,
    "int32": 4,
    "int64": 5,
    "uint8": 6,
}
SIZES = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int32": 4, "int64": 8,
         "uint8": 1}
NUMPY_NAMES = ("float32", "float64", "float16", "int32", "int64", "uint8")
_ALIASES = {"float": "float32", "double": "float64", "half": "float16", "int": "int32",
            "long": "int64", "f4": "float32", "f8": "float64", "f2": "float16", "i4": "int32",
            "i8": "int64", "u1": "uint8"}


def _supported(names):
  return ", ".join(names)


def unsupported(dtype, framework):
  names = NUMPY_NAMES if framework == "numpy" else tuple(CODES)
  extra = " (numpy has no bfloat16: use a torch tensor)" if framework == "numpy" else ""
  return TypeError("ringsync does not support dtype %s; supported %s dtypes: %s%s"
                   % (dtype, framework, _supported(names), extra))


def numpy_name(dtype):
  """The canonical name of a numpy dtype, or None when ringsync does not support it.

  Only native byte order counts: '>f4' on a little-endian machine is not float32.
  """
  np = sys.modules["numpy"]
  for name in NUMPY_NAMES:
    if dtype == np.dtype(name):
      return name
  return None


def torch_name(dtype):
  """The canonical name of a torch dtype, or None."""
  text = str(dtype)  # "torch.float32"
  name = text[len("torch."):] if text.startswith("torch.") else None
  return name if name in CODES else None


def canonical(dtype, framework):
  """The canonical name of a dtype given as a str, numpy dtype/type or torch.dtype.

  Raises TypeError naming the dtype when ringsync (or the framework) does not support it.
  """
  name = None
  if isinstance(dtype, str):
    name = _ALIASES.get(dtype.lower(), dtype.lower())
    if name not in CODES:
      name = None
  elif type(dtype).__module__ == "torch":
    name = torch_name(dtype)
  elif "numpy" in sys.modules:
    np = sys.modules["numpy"]
    try:
      name = numpy_name(np.dtype(dtype))
    except TypeError:
      name = None
  if name is None or (framework == "numpy" and name not in NUMPY_NAMES):
    raise unsupported(dtype, framework)
  return name


def native(name, framework):
  """The numpy dtype or torch.dtype for a canonical name."""
  if framework == "numpy":
    import numpy as np
    return np.dtype(name)
  import torch
  return getattr(torch, name)
