"""Reductions the communicator lacks, mapped onto it (msccl_py.torch.ops), in one process."""

from __future__ import annotations

import pytest

pytest.importorskip("torch.distributed")
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from msccl_py.errors import MscclRuntimeError, SizeError  # noqa: E402
from msccl_py.torch import ops  # noqa: E402
from msccl_py.torch.errors import (BackendError, CallTimeoutError, RefusedError,  # noqa: E402
                                   SizesError)


def test_bool_reduces_as_gloo():
    t = torch.tensor([True, False])
    for op, want in (("sum", "max"), ("prod", "min"), ("band", "min"), ("bor", "max")):
        with ops.reducible(t, op) as (w, wop):
            assert w.dtype == torch.uint8 and w.data_ptr() == t.data_ptr() and wop == want
    with pytest.raises(RefusedError, match="bool tensors with AVG"):
        with ops.reducible(t, "avg"):
            pass


def test_narrow_types_widen_and_write_back():
    t = torch.tensor([30000, -5], dtype=torch.int16)
    with ops.reducible(t, "sum") as (w, _):
        assert w.dtype == torch.int32
        w.mul_(4)                                   # 120000 wraps in int16
    assert t.tolist() == [torch.tensor(120000).to(torch.int16).item(), -20]
    h = torch.ones(3, dtype=torch.bfloat16)
    with ops.reducible(h, "max") as (w, _):
        assert w is h                               # MAX needs no widening
    src, op = ops.widened(torch.ones(2, dtype=torch.float16), "prod")
    assert src.dtype == torch.float32 and op == "prod"


def test_premul_sum_scales_a_copy():
    t = torch.tensor([1.0, 2.0])
    with ops.reducible(t, "premul_sum", 3.0) as (w, op):
        assert op == "sum" and w.tolist() == [3.0, 6.0] and w.data_ptr() != t.data_ptr()
    assert t.tolist() == [3.0, 6.0]                  # the reduced copy is written back
    src = torch.tensor([1.0, 2.0])
    scaled, _ = ops.widened(src, "premul_sum", torch.tensor([0.5]))
    assert scaled.tolist() == [0.5, 1.0] and src.tolist() == [1.0, 2.0]


def test_bitwise_ops_gather_integers_and_refuse_floats():
    assert ops.gathered("bxor", torch.int32) and not ops.gathered("band", torch.bool)
    assert ops.gathered("bxor", torch.bool) and not ops.gathered("sum", torch.int32)
    with pytest.raises(RefusedError, match="BAND with non-integral dtype torch.float32"):
        ops.gathered("band", torch.float32)
    rows = torch.tensor([[6, 3], [5, 1]], dtype=torch.int16)
    assert ops.reduce_rows(rows, "bxor").tolist() == [3, 2]


def test_op_of_reads_premul_factor():
    opts = dist.AllreduceOptions()
    opts.reduceOp = dist._make_nccl_premul_sum(2.5)
    assert ops.op_of(opts) == ("premul_sum", 2.5)
    assert ops.op_of(None) == ("sum", None)


def test_errors_are_both_msccl_and_torch():
    assert issubclass(RefusedError, MscclRuntimeError) and issubclass(RefusedError,
                                                                      dist.DistError)
    assert issubclass(SizesError, SizeError) and issubclass(SizesError, dist.DistError)
    assert issubclass(BackendError, dist.DistBackendError)
    assert issubclass(CallTimeoutError, dist.DistBackendError)
