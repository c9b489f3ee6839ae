"""The reference runtime's own scenarios (tests/runtime/test_reference.py), on the emulated kernel."""

from __future__ import annotations

import numpy as np
import pytest
from gpu_runtime_algos import needs_gxx, same

from msccl_py import ir
from msccl_py.errors import MscclDeadlockError, MscclRuntimeError
from msccl_py.plan import contract
from msccl_py.runtime import reference
from msccl_py.runtime.cupy import emulated_run
from msccl_py.runtime.expected import expected
from msccl_py.verify.samples import allpairs_allreduce, ring_allgather, ring_allreduce

pytestmark = needs_gxx
OPS = ["sum", "prod", "max", "min", "avg"]


def inputs_for(alg, S, dtype, rng, lo=-3, hi=4):
    cc = reference.plan_for(alg).call_chunks
    return [rng.integers(lo, hi, int(cc[r, 0]) * S).astype(dtype) for r in range(alg.ngpus)]


@pytest.mark.parametrize("dtype", sorted(contract.DTYPES))
@pytest.mark.parametrize("op", OPS)
def test_allreduce_every_op_and_dtype(dtype, op):
    alg = ring_allreduce(4, channels=2)
    rng = np.random.default_rng(3)
    xs = inputs_for(alg, 5, contract.dtype_of(dtype), rng, 0 if dtype == "uint8" else -3, 4)
    outs = emulated_run(alg, xs, op=op)
    for o, e in zip(outs, expected(alg, xs, op)):
        assert o.dtype == contract.dtype_of(dtype)
        np.testing.assert_array_equal(o, e)


def test_avg_divides_after_summing():
    alg = ring_allreduce(2)
    xs = [np.array([1, 3, 5, 7], np.int32), np.array([2, 4, 6, 9], np.int32)]
    assert emulated_run(alg, xs, op="avg")[0].tolist() == [1, 3, 5, 8]
    xf = [x.astype(np.float32) for x in xs]
    assert emulated_run(alg, xf, op="avg")[1].tolist() == [1.5, 3.5, 5.5, 8.0]


@pytest.mark.parametrize("slice_elems", [1, 2, 3, 7, None])
def test_pipelined_slices_give_the_same_result(slice_elems):
    alg = ring_allgather(4)
    xs = inputs_for(alg, 10, np.float64, np.random.default_rng(0))
    outs = emulated_run(alg, xs, slice_elems=slice_elems)
    for o, e in zip(outs, expected(alg, xs)):
        np.testing.assert_array_equal(o, e)


def test_inplace_and_outofplace_allgather_and_inputs_untouched():
    alg = ring_allgather(3)
    alg.inplace = True
    xs = [np.full(4, r + 1.0) for r in range(3)]
    keep = [x.copy() for x in xs]
    a = emulated_run(alg, xs, inplace=True)
    b = emulated_run(alg, xs, inplace=False)
    for o1, o2, e in zip(a, b, expected(alg, xs)):
        np.testing.assert_array_equal(o1, e)
        np.testing.assert_array_equal(o2, e)
    assert same(xs, keep)


def test_inplace_only_algorithm_refuses_outofplace():
    with pytest.raises(MscclRuntimeError, match="not declared out-of-place"):
        emulated_run(ring_allreduce(2), [np.zeros(2), np.zeros(2)], inplace=False)


def test_large_message_deadlock_is_caught_by_the_watchdog():
    alg = allpairs_allreduce(3)
    xs = [np.ones(9 * 4) for _ in range(3)]
    np.testing.assert_array_equal(emulated_run(alg, xs)[0], np.full(36, 3.0))
    with pytest.raises(MscclDeadlockError, match=r"deadlock: no progress.*FIFO room to send"):
        emulated_run(alg, xs, slice_elems=1, watchdog=0.5)
    ll = allpairs_allreduce(3, "LL")
    np.testing.assert_array_equal(emulated_run(ll, xs, slice_elems=1)[2], np.full(36, 3.0))


def test_unwritten_output_is_poisoned_like_the_reference():
    alg = ring_allgather(3)
    for gpu in alg.gpus:
        gpu.threadblocks[1].steps[0].dst = ir.Loc("o", (gpu.rank + 1) % 3)
    xs = [np.full(2, 1.0 + r) for r in range(3)]
    outs = emulated_run(alg, xs, slice_elems=1)
    assert np.isnan(outs[0][:2]).all()
    assert same(outs, reference.run(alg, xs, slice_elems=1))


def test_bad_inputs_are_reported_like_the_reference():
    alg = ring_allreduce(2)
    broken = ring_allreduce(2)
    broken.gpus[0].threadblocks[0].steps[0].src = ir.Loc("i", 9)
    with pytest.raises(MscclRuntimeError, match="rank 0 tb 0 step 0: source i"):
        emulated_run(broken, [np.zeros(4), np.zeros(4)])
    with pytest.raises(MscclRuntimeError, match="share one dtype"):
        emulated_run(alg, [np.zeros(4), np.zeros(4, np.int32)])
