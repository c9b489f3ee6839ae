"""bfloat16 for the CPU runtimes: NumPy has no such type, so its values travel as 2-byte voids.

An array of dtype :data:`BF16` (``V2``) holds bfloat16 bit patterns. It can
be copied, sliced and viewed like any array; arithmetic goes through float32
and rounds back to nearest-even, exactly as the native executor's
``to_bf16`` (``runtime/include/platform.h``) does, so both executors give the
same bits. ``element_type`` names an array's element type for the tables
that key on names.

>>> x = from_float32(np.array([1.0, 2.5, 3.0078125], dtype=np.float32))
>>> to_float32(x).tolist()
[1.0, 2.5, 3.0]
>>> to_float32(Bf16Ufunc(np.add)(x, x, out=np.empty(3, BF16))).tolist()
[2.0, 5.0, 6.0]
"""

from __future__ import annotations

import numpy as np

BF16 = np.dtype("V2")


def element_type(dtype: np.dtype) -> str:
    """``bfloat16`` for :data:`BF16` (or ml_dtypes' bfloat16), else the dtype's name."""
    return "bfloat16" if dtype == BF16 or dtype.name == "bfloat16" else dtype.name


def to_float32(x: np.ndarray) -> np.ndarray:
    """The float32 values of bfloat16 bits (exact)."""
    return (x.view(np.uint16).astype(np.uint32) << 16).view(np.float32)


def from_float32(f: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """float32 rounded to the nearest bfloat16 (ties to even; NaN stays a quiet NaN)."""
    u = np.ascontiguousarray(f, dtype=np.float32).view(np.uint32)
    bits = ((u + np.uint32(0x7FFF) + ((u >> 16) & np.uint32(1))) >> 16).astype(np.uint16)
    nan = (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    if nan.any():
        bits[nan] = ((u[nan] >> 16) | np.uint32(0x40)).astype(np.uint16)
    if out is None:
        return bits.view(BF16)
    np.copyto(out.view(np.uint16), bits.reshape(out.shape))
    return out


class Bf16Ufunc:
    """A binary ufunc on bfloat16 arrays: ``f(a, b, out=...)`` in float32, rounded once."""

    def __init__(self, ufunc: np.ufunc):
        self.ufunc = ufunc

    def __call__(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> np.ndarray:
        return from_float32(self.ufunc(to_float32(a), to_float32(b)), out)
