"""Gradient compression for the wire: what a tensor looks like while the daemon reduces it.

Horovod's interface (``compress(tensor) -> (tensor, ctx)``, ``decompress(tensor, ctx)``) so
Horovod code keeps working, plus ``wire_dtype(dtype)``: DistributedOptimizer fuses gradients
into one buffer per bucket and needs to know the buffer's dtype before any gradient exists.
"""

import torch


class Compressor:
  """No compression: tensors travel in their own dtype."""

  @staticmethod
  def wire_dtype(dtype):
    return dtype

  @staticmethod
  def compress(tensor):
    return tensor, None

  @staticmethod
  def decompress(tensor, ctx):
    return tensor


class NoneCompressor(Compressor):
  pass


class FP16Compressor(Compressor):
  """float32/float64 travel as float16 (half the bytes); results are cast back.

  The daemon reduces in float16, so sums lose precision (about 3 decimal digits) and
  overflow past 65504. Other dtypes (float16, bfloat16, integers) travel unchanged.
  """

  @staticmethod
  def wire_dtype(dtype):
    return torch.float16 if dtype in (torch.float32, torch.float64) else dtype

  @staticmethod
  def compress(tensor):
    if tensor.dtype in (torch.float32, torch.float64):
      return tensor.to(torch.float16), tensor.dtype
    return tensor, None

  @staticmethod
  def decompress(tensor, ctx):
    return tensor if ctx is None else tensor.to(ctx)


class Compression:
  """The available compressors, named as in Horovod: ``Compression.none``, ``Compression.fp16``."""
  none = NoneCompressor
  fp16 = FP16Compressor
