"""Call-level bookkeeping shared by the device backend and the emulation.

Works out a call's chunk size from the inputs, the size of every rank's
buffers, where in-place buffers alias (the plan's alias table), and the
``avg`` division done after a ``sum``. bfloat16 data travels as ``uint16``
bit patterns (NumPy has no bfloat16) unless ``ml_dtypes`` provides the dtype.

>>> to_bf16_bits(np.array([1.0, -2.5], dtype=np.float32)).tolist()
[16256, 49184]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from msccl_py.errors import MscclRuntimeError
from msccl_py.plan import tables as P
from msccl_py.plan.contract import check_inputs, chunk_elems, physical_chunks, resolve_inplace
from msccl_py.runtime.cupy.kernel_source import ITEMSIZE, dtype_name
from msccl_py.runtime.expected import finish_avg


def to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 values -> bfloat16 bit patterns (round to nearest even)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(nan, ((u >> 16) | 0x40).astype(np.uint16), r)


def from_bf16_bits(b: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns -> float32 values."""
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


@dataclass(frozen=True)
class CallLayout:
    """Chunk size, dtype and per-rank buffers of one call.

    ``storage[r, b]`` is the number of elements to allocate for physical
    buffer ``b`` of rank ``r`` (0 when it is an alias); logical buffer ``b``
    lives in physical buffer ``alias[r, b, 0]`` from chunk ``alias[r, b, 1]``
    (the same sizing as the reference runtime).
    """

    dtype: str
    chunk_elems: int
    inplace: bool
    call_chunks: np.ndarray       # (ranks, 3)
    storage: np.ndarray           # (ranks, 3) elements
    alias: np.ndarray             # plan.aliases(inplace)

    @property
    def itemsize(self) -> int:
        return ITEMSIZE[self.dtype]

    def offset(self, rank: int, buf: int) -> tuple[int, int]:
        """(physical buffer, element offset) where logical buffer ``buf`` of ``rank`` starts."""
        a, chunk = self.alias[rank, buf]
        return int(a), int(chunk) * self.chunk_elems


def layout(alg, plan: P.Plan, inputs: list, dtype: str | None = None,
           inplace: bool | None = None) -> CallLayout:
    """Check per-rank ``inputs`` against the plan and size the call's buffers.

    ``inputs[r]`` holds rank r's input buffer (``call_chunks[r, i]`` chunks);
    rank 0's length fixes the chunk size S.
    """
    # NumPy or CuPy arrays: only size, ndim, shape and dtype are read here
    arrs = [x if hasattr(x, "dtype") and hasattr(x, "ndim") else np.asarray(x) for x in inputs]
    check_inputs(alg, arrs)
    name = dtype_name(dtype if dtype is not None else arrs[0].dtype)
    if arrs[0].dtype.itemsize != ITEMSIZE[name]:
        raise MscclRuntimeError(f"inputs of dtype {arrs[0].dtype} cannot hold {name} data")
    cc = plan.call_chunks
    s = chunk_elems(alg, cc, arrs)
    inplace = resolve_inplace(alg, inplace)
    alias, chunks = physical_chunks(plan, inplace)
    return CallLayout(name, s, inplace, cc, chunks * s, alias)


def poison(name: str):
    """Fill of output and scratch before a call, so unwritten data shows (as the reference)."""
    if name == "bfloat16":
        return 0x7FC0
    if np.dtype(name).kind in "iu":
        return np.iinfo(name).max // 3
    return np.nan


def poisoned_row(cp, lay: CallLayout, rank: int) -> list:
    """Fresh device arrays for ``rank``'s three physical buffers of ``lay``, poisoned
    (allocated on the current device of ``cp``)."""
    hd = host_dtype(lay.dtype)
    row = []
    for b in range(3):
        a = cp.empty(max(1, int(lay.storage[rank, b])), dtype=hd)
        a.fill(poison(lay.dtype))
        row.append(a)
    return row


def host_dtype(name: str) -> np.dtype:
    """NumPy dtype holding ``name`` on the host (bfloat16: uint16 bits)."""
    return np.dtype(np.uint16) if name == "bfloat16" else np.dtype(name)


def divide_for_avg(out: np.ndarray, dtype: str, n: int) -> np.ndarray:
    """``out / n`` in ``dtype``: the reference's rule (integers truncate toward zero)."""
    if dtype == "bfloat16":
        return to_bf16_bits(from_bf16_bits(out) / np.float32(n))
    return finish_avg(out, n)


