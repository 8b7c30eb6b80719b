"""Reduction ops: the constants ringsync.Sum, ... and the strings accepted in their place."""

import enum


class ReduceOp(enum.IntEnum):
  """rs_op_t, by value. ringsync.Sum is ReduceOp.SUM, and so on."""
  SUM = 0
  AVERAGE = 1  # the sum divided by the number of ranks (integers: truncating division)
  MIN = 2
  MAX = 3
  PRODUCT = 4


Sum = ReduceOp.SUM
Average = ReduceOp.AVERAGE
Min = ReduceOp.MIN
Max = ReduceOp.MAX
Product = ReduceOp.PRODUCT

_BY_NAME = {
    "sum": Sum,
    "avg": Average, "average": Average, "mean": Average,
    "min": Min,
    "max": Max,
    "prod": Product, "product": Product,
}


def op_code(op):
  """The rs_op_t value of a ReduceOp (or its int value) or of a name like "sum" or "avg"."""
  if isinstance(op, str):
    found = _BY_NAME.get(op.lower())
    if found is not None:
      return int(found)
  elif isinstance(op, int) and not isinstance(op, bool):
    try:
      return int(ReduceOp(op))
    except ValueError:
      pass
  raise ValueError("unknown reduce op %r: use ringsync.Sum, Average, Min, Max or Product (or "
                   "'sum', 'avg', 'min', 'max', 'prod')" % (op,))
