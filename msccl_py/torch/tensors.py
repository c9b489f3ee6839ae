"""Torch tensors as the arrays the communicator takes: NumPy views of the same memory.

A contiguous CPU tensor becomes a flat NumPy view (no copy), so the shm
executor reads and writes the tensor's own memory; bfloat16 travels as its
bit patterns (:data:`msccl_py.runtime.bfloat16.BF16`). The view is made
from the tensor's address, not with ``Tensor.numpy()``, which would mark
the storage non-resizable for good (FSDP frees its buffers with
``resize_(0)``). A tensor of a dtype the communicator has no arithmetic for
(bool, int16, complex, float8 ...) is moved as its bytes
(:func:`as_bytes`); reductions widen or map it first (:mod:`.ops`). A non-contiguous
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


#: torch dtype -> NumPy dtype of its view (bfloat16: its bit patterns)
_NP = {d: (BF16 if d == torch.bfloat16 else np.dtype(name)) for d, name in DTYPES.items()}


class _Memory:
    """What a NumPy view made by :func:`as_array` keeps alive (its ``base``): the tensor."""

    __slots__ = ("tensor", "__array_interface__")

    def __init__(self, t: torch.Tensor, dtype: np.dtype, count: int):
        self.tensor = t
        self.__array_interface__ = {"data": (t.data_ptr(), False), "shape": (count,),
                                    "typestr": dtype.str, "version": 3}


def as_array(t: torch.Tensor) -> np.ndarray:
    """A flat NumPy view of contiguous CPU tensor ``t`` (bfloat16 as BF16 bit patterns);
    the storage stays resizable."""
    element_type_of(t.dtype)
    return np.asarray(_Memory(t, _NP[t.dtype], t.numel()))


def as_bytes(t: torch.Tensor) -> np.ndarray:
    """A flat uint8 view of contiguous CPU tensor ``t``'s bytes (any dtype)."""
    return np.asarray(_Memory(t, np.dtype(np.uint8), t.numel() * t.element_size()))


def units(dtype: torch.dtype) -> int:
    """Array elements per tensor element in :func:`host_view` (1, or the itemsize as bytes)."""
    return 1 if dtype in _NP else dtype.itemsize


def host_view(t: torch.Tensor) -> np.ndarray:
    """:func:`as_array` where the communicator has ``t``'s dtype, else :func:`as_bytes`: the
    view for calls that only move data."""
    return as_array(t) if t.dtype in _NP else as_bytes(t)


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
        self.array = host_view(t if self.direct else self.copy)

    def commit(self) -> None:
        if not self.direct:
            with torch.no_grad():
                self.tensor.copy_(self.copy)


class HotViews:
    """The NumPy view of tensors used again and again (DDP's buckets, a benchmark's buffer):
    the same view object each time lets the communicator repeat a call with one native
    call. Only small CPU tensors are kept (a few, by identity), so nothing big outlives
    its last use.

    :meth:`source` adds a private input array for an in-place call: the
    communicator repeats out-of-place calls whose input and output it has seen
    (its in-place path re-plans each call), so copying a small tensor to a
    fixed input and reducing into the tensor is cheaper than reducing in place.
    """

    MAX_BYTES = 1 << 20
    ENTRIES = 16
    #: in-place calls up to this size go through :meth:`source` (the communicator
    #: repeats calls whose input and output together take at most 1 MiB)
    SOURCE_BYTES = 1 << 19

    def __init__(self):
        self._views: dict[int, list] = {}

    def _entry(self, t: torch.Tensor) -> list | None:
        hit = self._views.get(id(t))
        if hit is not None and hit[0] is t and hit[1] == t.data_ptr() and \
                hit[2].size == t.numel() and hit[0].dtype == hit[3]:
            return hit
        return None

    def get(self, t: torch.Tensor) -> np.ndarray | None:
        """A flat view of contiguous CPU tensor ``t`` (cached when small), or None when ``t``
        is not a contiguous CPU tensor."""
        hit = self._entry(t)
        if hit is not None:
            return hit[2]
        if t.device.type != "cpu" or not t.is_contiguous():
            return None
        view = host_view(t)
        if view.nbytes <= self.MAX_BYTES:
            if len(self._views) >= self.ENTRIES:
                self._views.pop(next(iter(self._views)))
            self._views[id(t)] = [t, t.data_ptr(), view, t.dtype, None]
        return view

    def source(self, t: torch.Tensor) -> np.ndarray | None:
        """A private array holding a copy of ``t``'s values, the same array for every call
        on ``t`` (None when ``t`` is not a small tensor that :meth:`get` keeps)."""
        hit = self._entry(t)
        if hit is None or hit[2].nbytes > self.SOURCE_BYTES:
            return None
        if hit[4] is None:
            hit[4] = np.empty_like(hit[2])
        np.copyto(hit[4], hit[2])
        return hit[4]


def same_shape(tensors: list[torch.Tensor], what: str) -> None:
    """Refuse lists whose tensors differ in element count or dtype."""
    first = tensors[0]
    for k, t in enumerate(tensors[1:], 1):
        if t.numel() != first.numel() or t.dtype != first.dtype:
            raise MscclRuntimeError(f"{what}: tensor {k} has {t.numel()} {t.dtype} elements but "
                                    f"tensor 0 has {first.numel()} {first.dtype}; the msccl "
                                    f"backend needs equal tensors here")
