"""Torch tensors as the communicator's NumPy arrays (msccl_py.torch.tensors), in one process."""

from __future__ import annotations

import numpy as np
import pytest

# not importorskip("torch"): without torch, this folder imports as a namespace "torch"
pytest.importorskip("torch.distributed")
import torch  # noqa: E402

from msccl_py.errors import MscclRuntimeError  # noqa: E402
from msccl_py.runtime.bfloat16 import BF16, to_float32  # noqa: E402
from msccl_py.torch.tensors import (DTYPES, HotViews, Staged, as_array,  # noqa: E402
                                    element_type_of, same_shape)


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_as_array_is_the_tensors_memory(dtype):
    t = torch.arange(6, dtype=dtype).reshape(2, 3)
    a = as_array(t)
    assert a.shape == (6,) and a.ctypes.data == t.data_ptr()
    assert a.dtype == (BF16 if dtype == torch.bfloat16 else np.dtype(DTYPES[dtype]))
    values = to_float32(a) if dtype == torch.bfloat16 else a
    assert values.tolist() == list(range(6))


def test_unsupported_dtypes_are_refused_by_name():
    for dtype in (torch.int16, torch.bool, torch.complex64, torch.uint16):
        with pytest.raises(MscclRuntimeError, match=f"does not take {dtype}"):
            element_type_of(dtype)
        with pytest.raises(MscclRuntimeError, match="use one of torch.float32"):
            as_array(torch.zeros(2, dtype=dtype))


def test_staged_contiguous_is_direct():
    t = torch.zeros(4)
    s = Staged(t)
    assert s.direct and s.array.ctypes.data == t.data_ptr()


def test_staged_strided_writes_back_on_commit():
    base = torch.arange(12.0).reshape(3, 4)
    col = base[:, 1]
    s = Staged(col)
    assert not s.direct and s.array.tolist() == [1.0, 5.0, 9.0]
    s.array[:] = [-1, -2, -3]
    assert base[:, 1].tolist() == [1.0, 5.0, 9.0]      # not yet
    s.commit()
    assert base[:, 1].tolist() == [-1.0, -2.0, -3.0]
    assert base[:, 0].tolist() == [0.0, 4.0, 8.0]       # the rest untouched
    # read=False: the copy is not filled from the tensor (an output only)
    assert Staged(base.t(), read=False).array.size == 12


def test_staged_refuses_device_tensors():
    t = torch.zeros(2, device="meta")
    with pytest.raises(MscclRuntimeError, match="meta tensor reached the CPU path"):
        Staged(t)


def test_hot_views_reuse_the_same_view():
    hot = HotViews()
    t = torch.ones(8)
    v = hot.get(t)
    assert hot.get(t) is v and v.ctypes.data == t.data_ptr()
    assert hot.get(torch.ones(8)[::2]) is None                      # strided: not served
    big = torch.ones(HotViews.MAX_BYTES // 4 + 1)
    assert hot.get(big) is not hot.get(big)                        # large: never kept
    many = [torch.ones(2) for _ in range(HotViews.ENTRIES + 3)]
    for m in many:
        hot.get(m)
    assert len(hot._views) <= HotViews.ENTRIES


def test_same_shape_names_the_odd_tensor():
    same_shape([torch.zeros(3), torch.ones(3)], "all_gather")
    with pytest.raises(MscclRuntimeError, match="all_gather: tensor 2 has 4 torch.float32"):
        same_shape([torch.zeros(3), torch.ones(3), torch.ones(4)], "all_gather")
    with pytest.raises(MscclRuntimeError, match="tensor 1 has 3 torch.int32"):
        same_shape([torch.zeros(3), torch.ones(3, dtype=torch.int32)], "scatter")


def test_hot_source_is_a_fixed_copy():
    hot = HotViews()
    t = torch.arange(8.0)
    assert hot.source(t) is None                  # not yet a hot tensor
    v = hot.get(t)
    src = hot.source(t)
    assert src is not None and not np.shares_memory(src, v) and src.tolist() == t.tolist()
    t.add_(1)
    assert hot.source(t) is src and src.tolist() == t.tolist()    # the same array, refilled
    big = torch.zeros(HotViews.SOURCE_BYTES // 4 + 1)
    hot.get(big)
    assert hot.source(big) is None                # larger calls run in place
    # a tensor given other storage is a new entry, not the old view
    with torch.no_grad():
        t.set_(torch.arange(64.0))
    assert hot.get(t).size == 64 and hot.source(t).tolist() == list(range(64))



def test_views_leave_the_storage_resizable():
    # Tensor.numpy() marks a storage non-resizable for good; FSDP frees with resize_(0)
    t = torch.ones(8)
    a = as_array(t)
    assert a.base.tensor is t
    t.untyped_storage().resize_(0)
    t.untyped_storage().resize_(32)


def test_other_dtypes_move_as_bytes():
    from msccl_py.torch.tensors import host_view, units
    b = torch.tensor([True, False, True])
    v = host_view(b)
    assert v.dtype == np.uint8 and v.tolist() == [1, 0, 1] and units(torch.bool) == 1
    s = torch.tensor([1, -1], dtype=torch.int16)
    assert host_view(s).size == 4 and units(torch.int16) == 2
    assert host_view(torch.zeros(3)).dtype == np.float32 and units(torch.float32) == 1
