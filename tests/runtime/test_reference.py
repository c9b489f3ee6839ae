"""The NumPy reference runtime: ops, dtypes, in-place calls, pipelining, deadlocks, speed."""


import numpy as np
import pytest

from msccl_py import ir
from msccl_py.errors import MscclDeadlockError, MscclRuntimeError, SizeError
from msccl_py.plan import contract
from msccl_py.runtime import reference
from msccl_py.runtime.expected import expected
from msccl_py.verify.samples import allpairs_allreduce, ring_allgather, ring_allreduce

OPS = ["sum", "prod", "max", "min", "avg"]


def inputs_for(alg, S, dtype, rng, lo=-3, hi=4):
    cc = reference.plan_for(alg).call_chunks
    return [rng.integers(lo, hi, int(cc[r, 0]) * S).astype(dtype) for r in range(alg.ngpus)]


@pytest.mark.parametrize("dtype", sorted(contract.DTYPES))
@pytest.mark.parametrize("op", OPS)
def test_allreduce_every_op_and_dtype(dtype, op):
    alg = ring_allreduce(4, channels=2)
    rng = np.random.default_rng(3)
    lo = 0 if dtype == "uint8" else -3
    xs = inputs_for(alg, 5, contract.dtype_of(dtype), rng, lo, 4)
    outs = reference.run(alg, xs, op=op)
    for o, e in zip(outs, expected(alg, xs, op)):
        assert o.dtype == contract.dtype_of(dtype)
        np.testing.assert_array_equal(o, e)


def test_avg_divides_after_summing():
    alg = ring_allreduce(2)
    xs = [np.array([1, 3, 5, 7], np.int32), np.array([2, 4, 6, 9], np.int32)]
    assert reference.run(alg, xs, op="avg")[0].tolist() == [1, 3, 5, 8]
    xf = [x.astype(np.float32) for x in xs]
    assert reference.run(alg, xf, op="avg")[1].tolist() == [1.5, 3.5, 5.5, 8.0]


@pytest.mark.parametrize("slice_elems", [1, 2, 3, 7, None])
def test_pipelined_slices_give_the_same_result(slice_elems):
    alg = ring_allgather(4)
    rng = np.random.default_rng(0)
    xs = inputs_for(alg, 10, np.float64, rng)
    outs = reference.run(alg, xs, slice_elems=slice_elems)
    for o, e in zip(outs, expected(alg, xs)):
        np.testing.assert_array_equal(o, e)


def test_inplace_and_outofplace_allgather_and_inputs_untouched():
    alg = ring_allgather(3)
    alg.inplace = True
    xs = [np.full(4, r + 1.0) for r in range(3)]
    keep = [x.copy() for x in xs]
    a = reference.run(alg, xs, inplace=True)
    b = reference.run(alg, xs, inplace=False)
    for o1, o2, e in zip(a, b, expected(alg, xs)):
        np.testing.assert_array_equal(o1, e)
        np.testing.assert_array_equal(o2, e)
    for x, k in zip(xs, keep):
        np.testing.assert_array_equal(x, k)


def test_inplace_only_algorithm_refuses_outofplace():
    alg = ring_allreduce(2)
    with pytest.raises(MscclRuntimeError, match="not declared out-of-place"):
        reference.run(alg, [np.zeros(2), np.zeros(2)], inplace=False)


def test_large_message_deadlock_raises_with_cycle():
    alg = allpairs_allreduce(3)
    xs = [np.ones(9 * 4) for _ in range(3)]
    np.testing.assert_array_equal(reference.run(alg, xs)[0], np.full(36, 3.0))
    with pytest.raises(MscclDeadlockError, match=r"rank 0 tb 0 step 0 \(send.*room in the FIFO"):
        reference.run(alg, xs, slice_elems=1)
    ll = allpairs_allreduce(3, "LL")
    np.testing.assert_array_equal(reference.run(ll, xs, slice_elems=1)[2], np.full(36, 3.0))


def test_unwritten_output_is_poisoned():
    alg = ring_allgather(3)
    for gpu in alg.gpus:   # never copy the local chunk into place
        gpu.threadblocks[1].steps[0].dst = ir.Loc("o", (gpu.rank + 1) % 3)
    outs = reference.run(alg, [np.full(2, 1.0 + r) for r in range(3)], slice_elems=1)
    assert np.isnan(outs[0][:2]).all()


def test_bad_inputs_are_reported():
    alg = ring_allreduce(2)
    with pytest.raises(SizeError, match="runs on 2 ranks but got 1"):
        reference.run(alg, [np.zeros(4)])
    with pytest.raises(SizeError, match="rank 1 input must be 1-D with 4"):
        reference.run(alg, [np.zeros(4), np.zeros(6)])
    with pytest.raises(MscclRuntimeError, match="unknown reduction op 'xor'"):
        reference.run(alg, [np.zeros(4), np.zeros(4)], op="xor")
    with pytest.raises(MscclRuntimeError, match="share one dtype"):
        reference.run(alg, [np.zeros(4), np.zeros(4, np.int32)])
    broken = ring_allreduce(2)
    broken.gpus[0].threadblocks[0].steps[0].src = ir.Loc("i", 9)
    with pytest.raises(MscclRuntimeError, match="rank 0 tb 0 step 0: source i"):
        reference.run(broken, [np.zeros(4), np.zeros(4)])
    with pytest.raises(MscclRuntimeError, match="unsupported dtype"):
        contract.dtype_of("complex64")


def test_a_16_mib_ring_allreduce_is_exact_on_every_rank():
    """16 MiB per rank, 4 ranks: large buffers move in whole chunks, exactly (its speed is
    measured by benchmarks/run_timing.py, not asserted here)."""
    alg = ring_allreduce(4)
    n = (16 << 20) // 4
    xs = [np.full(n, r + 1, np.float32) for r in range(4)]
    xs[2][::7] = 0.5
    want = sum(x.astype(np.float64) for x in xs).astype(np.float32)
    out = reference.run(alg, xs)
    for r in range(4):
        np.testing.assert_array_equal(out[r], want)
