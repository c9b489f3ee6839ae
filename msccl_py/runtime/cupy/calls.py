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

from msccl_py.errors import MscclRuntimeError, SizeError
from msccl_py.runtime import plan as P
from msccl_py.runtime.cupy.source import ITEMSIZE, dtype_name


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
    """Chunk size, dtype and per-rank buffer sizes (elements) of one call."""

    dtype: str
    chunk_elems: int
    buffer_elems: np.ndarray      # (ranks, 3): i, o, s
    alias: np.ndarray             # plan.aliases(inplace)

    @property
    def itemsize(self) -> int:
        return ITEMSIZE[self.dtype]

    def storage_elems(self, rank: int, buf: int) -> int:
        """Elements to allocate for buffer ``buf`` of ``rank`` (0 when it aliases another)."""
        if self.alias[rank, buf, 0] != buf:
            return 0
        return int(self.buffer_elems[rank, buf])

    def offset(self, rank: int, buf: int) -> tuple[int, int]:
        """(storage buffer, element offset) that buffer ``buf`` of ``rank`` lives at."""
        a, chunk = self.alias[rank, buf]
        return int(a), int(chunk) * self.chunk_elems


def layout(plan: P.Plan, inputs: list, dtype: str | None = None,
           inplace: bool = False) -> CallLayout:
    """Check per-rank ``inputs`` against the plan and size the call's buffers.

    ``inputs[r]`` holds rank r's input buffer (``call_chunks[r, i]`` chunks);
    its length fixes the chunk size S.
    """
    n = plan.ngpus
    if len(inputs) != n:
        raise MscclRuntimeError(f"the algorithm has {n} ranks but {len(inputs)} inputs were given")
    name = dtype_name(dtype if dtype is not None else np.asarray(inputs[0]).dtype)
    if dtype is None and name == "bfloat16":
        name = "bfloat16"
    chunks_i = plan.call_chunks[:, P.BUF_I]
    lens = [np.asarray(x).size for x in inputs]
    ref = next((r for r in range(n) if chunks_i[r] > 0), None)
    if ref is None:
        raise MscclRuntimeError("no rank has input chunks, so the chunk size is undefined")
    if lens[ref] % chunks_i[ref]:
        raise SizeError(f"rank {ref}: {lens[ref]} input elements do not divide into "
                        f"{chunks_i[ref]} chunks")
    s = lens[ref] // int(chunks_i[ref])
    for r in range(n):
        if lens[r] != s * chunks_i[r]:
            raise SizeError(f"rank {r}: {lens[r]} input elements, expected "
                            f"{s * chunks_i[r]} ({chunks_i[r]} chunks of {s})")
    return CallLayout(name, s, plan.call_chunks * s, plan.aliases(inplace))


def host_dtype(name: str) -> np.dtype:
    """NumPy dtype holding ``name`` on the host (bfloat16: uint16 bits)."""
    return np.dtype(np.uint16) if name == "bfloat16" else np.dtype(name)


def divide_for_avg(out: np.ndarray, dtype: str, n: int) -> np.ndarray:
    """``out / n`` in ``dtype`` (integers truncate toward zero, as NCCL does)."""
    if dtype == "bfloat16":
        return to_bf16_bits(from_bf16_bits(out) / np.float32(n))
    if np.dtype(dtype).kind in "iu":
        return (np.sign(out) * (np.abs(out) // n)).astype(dtype)
    return (out.astype(np.float64) / n).astype(dtype)
