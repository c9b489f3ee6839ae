"""Reduction ops and dtypes for the msccl backend: what the communicator reduces, and how.

The communicator reduces float16/32/64, bfloat16, int8/32/64 and uint8 with
sum, prod, min, max and avg. Everything else ``torch.distributed`` can ask
for is mapped onto that here, with gloo's results (checked against
``ProcessGroupGloo`` of torch 2.13):

* **bool**: its bytes as uint8; SUM and MAX (and BOR) reduce as max, PRODUCT
  and MIN (and BAND) as min: gloo's ``a + b`` and ``a * b`` on bool are OR
  and AND. BXOR of bools goes the gathered way below.
* **int16, uint16, uint32**: reduced in int32 / int64 and cast back; sums
  and products wrap as they would in the narrow type.
* **float16, bfloat16**: SUM, AVG and PRODUCT reduce in float32 and round
  once (a product of 4 bfloat16 values rounded at each step can end over 1%
  from the exact one).
* **BAND, BOR, BXOR** of integers: every rank's tensor is gathered (one
  all_gather) and reduced locally with torch's bitwise ops; floats are
  refused as gloo refuses them.
* **PREMUL_SUM** (``dist._make_nccl_premul_sum(factor)``): the input times
  ``factor``, then SUM, as NCCL defines it (gloo refuses it).

>>> reducible_dtype(torch.int16)
torch.int32
"""

from __future__ import annotations

import contextlib
import functools

import torch
import torch.distributed as dist

from msccl_py.torch.errors import RefusedError
from msccl_py.torch.tensors import DTYPES

_RED = dist.ReduceOp.RedOpType
#: keyed by the enum's value: hashing the pybind enum itself costs several microseconds
OPS = {int(_RED.SUM): "sum", int(_RED.AVG): "avg", int(_RED.PRODUCT): "prod",
       int(_RED.MIN): "min", int(_RED.MAX): "max", int(_RED.BAND): "band",
       int(_RED.BOR): "bor", int(_RED.BXOR): "bxor", int(_RED.PREMUL_SUM): "premul_sum"}
BITWISE = {"band": torch.bitwise_and, "bor": torch.bitwise_or, "bxor": torch.bitwise_xor}
#: arithmetic reductions that run in a wider type
ARITH = ("sum", "avg", "prod")
#: narrow types reduced in a wider one: (wider type, ops that widen)
_WIDER = {torch.float16: (torch.float32, ARITH), torch.bfloat16: (torch.float32, ARITH),
          torch.int16: (torch.int32, None), torch.uint16: (torch.int32, None),
          torch.uint32: (torch.int64, None)}
_BOOL_OPS = {"sum": "max", "max": "max", "bor": "max", "prod": "min", "min": "min",
             "band": "min"}


def op_of(opts) -> tuple[str, object]:
    """(op name, PREMUL_SUM's factor or None) of a call's options (None: SUM)."""
    if opts is None:
        return "sum", None
    red = opts.reduceOp
    name = OPS.get(red.op.value)
    if name is None:
        raise RefusedError(f"the msccl backend does not implement {red.op.name}")
    return name, (red.factor if name == "premul_sum" else None)


def reducible_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the communicator reduces ``dtype`` in (for arithmetic ops)."""
    wider = _WIDER.get(dtype)
    return wider[0] if wider is not None else dtype


def gathered(op: str, dtype: torch.dtype) -> bool:
    """True when ``op`` on ``dtype`` reduces locally after an all_gather (bitwise ops);
    refuses the combinations gloo refuses."""
    if op in BITWISE:
        if dtype.is_floating_point or dtype.is_complex:
            raise RefusedError(f"Cannot use ReduceOp.{op.upper()} with non-integral dtype "
                               f"{dtype}")
        return not (dtype == torch.bool and op in _BOOL_OPS)
    return False


def reduce_rows(rows: torch.Tensor, op: str) -> torch.Tensor:
    """The reduction over dim 0 of ``rows`` (one row per rank) with a bitwise ``op``."""
    return functools.reduce(BITWISE[op], rows.unbind(0))


def _plan(dtype: torch.dtype, op: str) -> tuple[str, torch.dtype, str]:
    """How ``op`` on ``dtype`` reaches the communicator: ``("view"|"wide"|"as is", dtype it
    runs in, op it runs)``."""
    if dtype == torch.bool:
        mapped = _BOOL_OPS.get(op)
        if mapped is None:
            raise RefusedError(f"the msccl backend does not reduce bool tensors with "
                               f"{op.upper()} (gloo does not either)")
        return "view", torch.uint8, mapped
    wider = _WIDER.get(dtype)
    if wider is not None and (wider[1] is None or op in wider[1]):
        return "wide", wider[0], op
    if dtype not in DTYPES:
        raise RefusedError(f"the msccl backend does not reduce {dtype} tensors")
    return "as is", dtype, op


@contextlib.contextmanager
def reducible(t: torch.Tensor, op: str, factor=None, read: bool = True, write: bool = True):
    """``(tensor, op)`` the communicator can reduce in place of ``t`` with ``op``; what it
    holds at the end is written back into ``t`` (``write``). ``read=False``: the tensor's
    values are not needed (an output). ``t`` itself is yielded when nothing changes."""
    if op == "premul_sum":
        w = t.detach() * factor if read else torch.empty_like(t)
        with reducible(w, "sum", read=read, write=write) as inner:
            yield inner
        if write:
            with torch.no_grad():
                t.copy_(w)
        return
    how, dtype, op = _plan(t.dtype, op)
    if how == "as is":
        yield t, op
    elif how == "view":
        yield t.view(dtype), op
    else:
        w = t.detach().to(dtype) if read else torch.empty(t.shape, dtype=dtype)
        yield w, op
        if write:
            with torch.no_grad():
                t.copy_(w)


def widened(t: torch.Tensor, op: str, factor=None) -> tuple[torch.Tensor, str]:
    """An input ``t`` as :func:`reducible` would reduce it (a copy when it differs), for
    inputs that are only read (reduce_scatter's)."""
    if op == "premul_sum":
        return widened(t.detach() * factor, "sum")
    how, dtype, op = _plan(t.dtype, op)
    return (t if how == "as is" else t.view(dtype) if how == "view" else
            t.detach().to(dtype)), op
