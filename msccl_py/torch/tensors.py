"""Torch tensors as the arrays the communicator takes: NumPy views of the same memory.

A contiguous CPU tensor becomes a flat NumPy view (no copy), so the shm
executor reads and writes the tensor's own memory; bfloat16 travels as its
bit patterns (:data:`msccl_py.runtime.bfloat16.BF16`). A non-contiguous
tensor is read through a contiguous copy and written back element by
element (:class:`Staged`), so every layout works, the strided ones at the
cost of a copy each way.

>>> import torch
>>> t = torch.arange(6, dtype=torch.float32)
>>> a = as_array(t); a[0] = 7; float(t[0])
7.0
>>> element_type_of(torch.bfloat16)
'bfloat16'
"""

from __future__ import annotations

import numpy as np
import torch

from msccl_py.errors import MscclRuntimeError
from msccl_py.runtime.bfloat16 import BF16

#: torch dtype -> the communicator's element type name
DTYPES = {torch.float32: "float32", torch.float64: "float64", torch.float16: "float16",
          torch.bfloat16: "bfloat16", torch.int8: "int8", torch.int32: "int32",
          torch.int64: "int64", torch.uint8: "uint8"}


def element_type_of(dtype: torch.dtype) -> str:
    """The communicator's name of a torch dtype; a clear error for the others."""
    try:
        return DTYPES[dtype]
    except KeyError:
        raise MscclRuntimeError(f"the msccl backend does not take {dtype} tensors; use one of "
                                f"{', '.join(str(d) for d in DTYPES)}") from None


def as_array(t: torch.Tensor) -> np.ndarray:
    """A flat NumPy view of contiguous CPU tensor ``t`` (bfloat16 as BF16 bit patterns)."""
    element_type_of(t.dtype)
    flat = t.detach().reshape(-1)
    if t.dtype == torch.bfloat16:
        return flat.view(torch.int16).numpy().view(BF16)
    return flat.numpy()


class Staged:
    """A tensor's data as a flat NumPy array: the tensor's own memory when it is a
    contiguous CPU tensor, else a contiguous copy whose changes :meth:`commit` writes back."""

    def __init__(self, t: torch.Tensor, read: bool = True):
        self.tensor = t
        if t.device.type != "cpu":
            raise MscclRuntimeError(f"a {t.device.type} tensor reached the CPU path")
        self.direct = t.is_contiguous()
        self.copy = None if self.direct else (t.detach().contiguous() if read else
                                              torch.empty(t.shape, dtype=t.dtype))
        self.array = as_array(t if self.direct else self.copy)

    def commit(self) -> None:
        if not self.direct:
            with torch.no_grad():
                self.tensor.copy_(self.copy)


class HotViews:
    """The NumPy view of tensors used again and again (DDP's buckets, a benchmark's buffer):
    the same view object each time lets the communicator repeat a call with one native
    call. Only small CPU tensors are kept (a few, by identity), so nothing big outlives
    its last use."""

    MAX_BYTES = 1 << 20
    ENTRIES = 16

    def __init__(self):
        self._views: dict[int, tuple] = {}

    def get(self, t: torch.Tensor) -> np.ndarray | None:
        """A flat view of contiguous CPU tensor ``t`` (cached when small), or None when ``t``
        is not a contiguous CPU tensor."""
        hit = self._views.get(id(t))
        ptr = t.data_ptr()
        if hit is not None and hit[0] is t and hit[1] == ptr and hit[2].size == t.numel():
            return hit[2]
        if t.device.type != "cpu" or not t.is_contiguous():
            return None
        view = as_array(t)
        if view.nbytes <= self.MAX_BYTES:
            if len(self._views) >= self.ENTRIES:
                self._views.pop(next(iter(self._views)))
            self._views[id(t)] = (t, ptr, view)
        return view


def same_shape(tensors: list[torch.Tensor], what: str) -> None:
    """Refuse lists whose tensors differ in element count or dtype."""
    first = tensors[0]
    for k, t in enumerate(tensors[1:], 1):
        if t.numel() != first.numel() or t.dtype != first.dtype:
            raise MscclRuntimeError(f"{what}: tensor {k} has {t.numel()} {t.dtype} elements but "
                                    f"tensor 0 has {first.numel()} {first.dtype}; the msccl "
                                    f"backend needs equal tensors here")
