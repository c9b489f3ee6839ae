"""The shm runtime on hand-built IR: every collective, dtype and op, pipelining, errors."""

from __future__ import annotations

import numpy as np
import pytest

from msccl_py import ir
from msccl_py.errors import MscclDeadlockError, MscclRuntimeError, SizeError
from msccl_py.ir import Loc, Step, Threadblock
from msccl_py.runtime import reference, shm
from msccl_py.runtime import shm_fallback as F
from msccl_py.runtime.expected import expected

DTYPES = ("float16", "float32", "float64", "int32", "int64", "uint8")
OPS = ("sum", "prod", "max", "min", "avg")


@pytest.fixture(scope="module", autouse=True)
def _pools():
    yield
    shm.close()


def _values(rng, size, dtype, op):
    """Small integers, so every dtype and op is exact (no overflow, exact float sums)."""
    hi = 3 if op == "prod" else 20
    lo = 0 if np.dtype(dtype).kind == "u" else (-2 if op == "prod" else -20)
    return rng.integers(lo, hi, size=size).astype(dtype)


@pytest.mark.parametrize("n", [2, 4, 8])
def test_every_builtin_collective_is_correct(n):
    rng = np.random.default_rng(n)
    k = 5
    cases = [(F.allreduce_ring(n), n * k), (F.allgather_ring(n), k),
             (F.reduce_scatter_ring(n), n * k), (F.alltoall_direct(n), n * k),
             (F.broadcast_chain(n, root=n - 1), k), (F.reduce_chain(n, root=1), k)]
    for alg, size in cases:
        xs = [rng.integers(-9, 9, size=size) for _ in range(n)]
        root = n - 1 if alg.collective == "broadcast" else 1
        for r, (got, want) in enumerate(zip(shm.run(alg, xs), expected(alg, xs, root=root))):
            if want is not None:
                np.testing.assert_array_equal(got, want, err_msg=f"{alg.name} rank {r}")
    xs = [rng.integers(-9, 9, size=k) for _ in range(n)]
    got = shm.run(F.gather_direct(n, root=n - 1), xs)
    np.testing.assert_array_equal(got[n - 1], np.concatenate(xs))
    xs = [rng.integers(-9, 9, size=n * k) for _ in range(n)]
    got = shm.run(F.scatter_direct(n, root=0), xs)
    for r in range(n):
        np.testing.assert_array_equal(got[r], xs[0][r * k:(r + 1) * k])


@pytest.mark.parametrize("dtype", DTYPES)
def test_allreduce_every_op_is_exact(dtype):
    alg = F.allreduce_ring(4)
    rng = np.random.default_rng(1)
    for op in OPS:
        xs = [_values(rng, 4 * 33, dtype, op) for _ in range(4)]
        want = expected(alg, xs, op)
        for r, got in enumerate(shm.run(alg, xs, op)):
            assert got.dtype == np.dtype(dtype)
            np.testing.assert_array_equal(got, want[r], err_msg=f"{op} {dtype} rank {r}")


def test_many_pipeline_iterations_with_ragged_tail():
    # an 8 KiB FIFO makes a 1 KiB slice per chunk: 10007 floats per chunk is 40 iterations,
    # the last one partial
    alg = F.allreduce_ring(4, channels=2)
    rng = np.random.default_rng(2)
    xs = [rng.integers(-100, 100, size=8 * 10007).astype(np.float32) for _ in range(4)]
    want = sum(x.astype(np.float64) for x in xs)
    for got in shm.run(alg, xs, buffsize=1 << 13):
        np.testing.assert_array_equal(got, want.astype(np.float32))


@pytest.mark.parametrize("builder,size", [(F.allreduce_ring, 12), (F.allgather_ring, 3),
                                          (F.reduce_scatter_ring, 12)])
def test_in_place_matches_out_of_place(builder, size):
    alg = builder(4)
    xs = [np.arange(size, dtype=np.int64) * (r + 2) for r in range(4)]
    for a, b in zip(shm.run(alg, xs, inplace=True), shm.run(alg, xs, inplace=False)):
        np.testing.assert_array_equal(a, b)


def _multi_count(count: int) -> ir.Algorithm:
    """Rank 0 sends chunks 0..count-1 in one step; rank 1 reduces them into its own."""
    send = Threadblock(0, 1, -1, 0, [Step("send", Loc("i", 0), Loc("o", 0), count)])
    recv = Threadblock(0, -1, 0, 0, [Step("recv_reduce_copy", Loc("i", 0), Loc("o", 0), count)])
    return ir.Algorithm("multi", "custom", "Simple", False, 2, count, 1,
                        [ir.Gpu(0, count, count, 0, [send]), ir.Gpu(1, count, count, 0, [recv])])


@pytest.mark.parametrize("per_chunk", [3, 5000])
def test_multi_chunk_steps_match_reference(per_chunk):
    # 3 elements: one transfer carries all 4 chunks; 5000: one transfer per chunk per slice
    alg = _multi_count(4)
    xs = [np.arange(4 * per_chunk, dtype=np.float64) + 1000 * r for r in range(2)]
    got = shm.run(alg, xs, buffsize=1 << 14)
    want = reference.run(alg, xs, buffsize=1 << 14)
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[1], xs[0] + xs[1])


def _exchange(count: int, recv_first: bool) -> ir.Algorithm:
    def tb(peer):
        steps = [Step("send", Loc("i", 0), Loc("o", 0), count),
                 Step("recv", Loc("i", 0), Loc("o", 0), count)]
        return Threadblock(0, peer, peer, 0, steps[::-1] if recv_first else steps)
    return ir.Algorithm("exchange", "custom", "Simple", False, 2, count, 1,
                        [ir.Gpu(0, count, count, 0, [tb(1)]), ir.Gpu(1, count, count, 0, [tb(0)])])


def test_recv_recv_deadlock_reports_every_rank():
    with pytest.raises(MscclDeadlockError) as info:
        shm.run(_exchange(1, recv_first=True), [np.ones(4), np.ones(4)], timeout=0.5)
    text = str(info.value)
    assert "no progress for 0.5 s" in text
    for r, peer in ((0, 1), (1, 0)):
        assert f"rank {r}: in call #1" in text
        assert f"waits for data from rank {peer} on channel 0" in text
    # the pool was torn down; the next call starts a fresh one and works
    got = shm.run(F.allreduce_ring(2), [np.ones(2), np.ones(2)])
    np.testing.assert_array_equal(got[0], [2.0, 2.0])


def test_size_dependent_deadlock_follows_the_fifo_bound():
    alg = _exchange(4, recv_first=False)
    # small: each 4-chunk send is one transfer and fits the FIFO
    xs = [np.arange(4 * 8, dtype=np.float32) + r for r in range(2)]
    got = shm.run(alg, xs, buffsize=1 << 14)
    np.testing.assert_array_equal(got[0], xs[1])
    # large: one transfer per chunk, four of them, but the FIFO holds two
    xs = [np.ones(4 * 4096, dtype=np.float32) for _ in range(2)]
    with pytest.raises(MscclDeadlockError, match="waits for FIFO space towards rank"):
        shm.run(alg, xs, buffsize=1 << 14, timeout=0.5)


def test_unmatched_connection_is_rejected_before_running():
    alg = _multi_count(2)
    alg.gpus[1].threadblocks[0].steps[0].count = 1
    with pytest.raises(MscclRuntimeError, match=r"rank 0 tb 0 step 0 \(send\) sends 2 chunks"):
        shm.run(alg, [np.ones(4), np.ones(4)])
    alg = _multi_count(1)
    alg.gpus[1].threadblocks = []
    with pytest.raises(MscclRuntimeError, match="rank 1 has no threadblock receiving from rank 0"):
        shm.run(alg, [np.ones(1), np.ones(1)])


def test_bad_chunk_offset_names_the_step():
    alg = _multi_count(1)
    alg.gpus[0].threadblocks[0].steps[0].src = Loc("i", 3)
    with pytest.raises(MscclRuntimeError, match=r"rank 0 tb 0 step 0 \(send\): source chunks 3"):
        shm.run(alg, [np.ones(1), np.ones(1)])


def test_bad_inputs_raise_clear_errors():
    alg = F.allreduce_ring(2)
    with pytest.raises(SizeError, match="rank 0 input has 3 elements, not a multiple of its 2 "):
        shm.run(alg, [np.ones(3), np.ones(3)])
    with pytest.raises(SizeError, match="runs on 2 ranks but got 1 inputs"):
        shm.run(alg, [np.ones(2)])
    with pytest.raises(MscclRuntimeError, match="dtype complex128 is not supported"):
        shm.run(alg, [np.ones(2, complex), np.ones(2, complex)])
    with pytest.raises(MscclRuntimeError, match="unknown reduction op 'xor'"):
        shm.run(alg, [np.ones(2), np.ones(2)], op="xor")


def test_pool_is_reused_across_calls():
    alg = F.allgather_ring(4)
    xs = [np.full(3, r, dtype=np.int32) for r in range(4)]
    shm.run(alg, xs)
    pool = next(iter(p for k, p in shm._pools.items() if k[0] == 4))
    pids = [p.pid for p in pool.group.procs]
    for _ in range(5):
        got = shm.run(alg, xs)
    assert [p.pid for p in pool.group.procs] == pids
    np.testing.assert_array_equal(got[3], np.repeat(np.arange(4, dtype=np.int32), 3))
