"""Failure behaviour of launch(): errors, deaths, stalls and mismatches end cleanly."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import numpy as np
import pytest

import msccl_py
from msccl_py.errors import MscclDeadlockError, MscclRuntimeError
from msccl_py.runtime import shm
from msccl_py.runtime.process_group import ProcessGroup, RankError


def _children() -> list[int]:
    """Live (or unreaped) child processes of this test process."""
    me = str(os.getpid())
    kids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me:
            kids.append(int(entry.name))
    return kids


@pytest.fixture(autouse=True)
def no_leaks():
    """Every test must leave no child process and no new /dev/shm entry behind."""
    shm.close()
    before_shm = set(os.listdir("/dev/shm"))
    before = set(_children())
    yield
    deadline = time.monotonic() + 5
    while set(_children()) - before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert set(_children()) - before == set(), "rank processes were left behind"
    assert set(os.listdir("/dev/shm")) - before_shm == set(), "shared memory was left behind"


def _raises_on_rank_1(comm):
    if comm.rank == 1:
        raise ValueError("bad input on rank 1")
    comm.all_reduce(np.ones(16))
    return comm.rank


def test_exception_in_one_rank_raises_that_error_and_stops_the_others():
    t0 = time.monotonic()
    with pytest.raises(RankError) as info:
        msccl_py.launch(_raises_on_rank_1, 4, timeout=30)
    assert time.monotonic() - t0 < 20, "the other ranks hung instead of stopping"
    err = info.value
    assert err.rank == 1 and err.remote_type == "ValueError"
    assert "rank 1 raised ValueError: bad input on rank 1" in str(err)
    assert "_raises_on_rank_1" in err.remote_traceback
    assert isinstance(err.__cause__, ValueError)


def _killed_rank_2(comm):
    comm.barrier()
    if comm.rank == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    comm.all_reduce(np.ones(1 << 16, dtype=np.float32))
    return "finished"


def test_killed_rank_is_detected_and_reported_quickly():
    t0 = time.monotonic()
    with pytest.raises(MscclRuntimeError, match=r"rank 2 died \(killed by signal SIGKILL\)"):
        msccl_py.launch(_killed_rank_2, 4, timeout=60)
    assert time.monotonic() - t0 < 20


def _rank_0_skips(comm):
    if comm.rank == 0:
        time.sleep(30)        # busy outside any collective; killed after the grace period
    comm.all_reduce(np.ones(8))
    return comm.rank


def test_stalled_collective_reports_what_each_threadblock_waits_on():
    with pytest.raises(MscclDeadlockError) as info:
        msccl_py.launch(_rank_0_skips, 3, timeout=0.5, grace=1.0, programs="builtin")
    text = str(info.value)
    assert "no progress for 0.5 s in call #1 allreduce(count=8" in text
    assert "rank 1: in call #1" in text and "rank 2: in call #1" in text
    assert "waits for rank 0 to enter call #1" in text
    assert "tb 0 (channel 0, send 2, recv 0)" in text          # rank 1's ring threadblock
    assert "rank 0: no report (did not stop after the failure; killed)" in text


def _sizes_differ(comm):
    comm.all_reduce(np.ones(100 if comm.rank == 3 else 64))


def _dtypes_differ(comm):
    comm.all_gather(np.ones(4, dtype=np.float32 if comm.rank else np.float64))


def _collectives_differ(comm):
    if comm.rank == 0:
        comm.all_gather(np.ones(4))
    else:
        comm.all_reduce(np.ones(4))


def _roots_differ(comm):
    comm.broadcast(np.ones(4), root=comm.rank % 2)


@pytest.mark.parametrize("fn,pattern", [
    (_sizes_differ, r"allreduce\(count=(100|64).*but rank \d called allreduce\(count=(100|64)"),
    (_dtypes_differ, r"dtype=float(32|64).*but rank \d called allgather\(count=4, dtype=float"),
    (_collectives_differ, r"called (allgather|allreduce)\(.*but rank \d called (allreduce|allgather)"),
    (_roots_differ, r"root=[01].*but rank \d called broadcast\(count=4, dtype=float64, root=[01]"),
])
def test_mismatched_calls_raise_instead_of_corrupting(fn, pattern):
    t0 = time.monotonic()
    with pytest.raises(MscclRuntimeError, match="mismatched collective calls at call #1") as info:
        msccl_py.launch(fn, 4, timeout=30, programs="builtin")
    assert time.monotonic() - t0 < 20
    assert re.search(pattern, str(info.value)), str(info.value)


def _unpicklable_result(comm):
    return lambda: comm.rank


def test_unpicklable_return_value_is_reported():
    with pytest.raises(RankError, match="cannot be sent to the parent"):
        msccl_py.launch(_unpicklable_result, 2)


def test_bad_arguments_raise_before_starting():
    with pytest.raises(MscclRuntimeError, match="world_size must be a positive integer"):
        msccl_py.launch(_raises_on_rank_1, 0)
    with pytest.raises(MscclRuntimeError, match="unknown backend 'mpi'"):
        msccl_py.launch(_raises_on_rank_1, 2, backend="mpi")


def test_shm_run_deadlock_leaves_nothing_behind():
    from msccl_py import ir
    def tb(peer):
        return ir.Threadblock(0, peer, peer, 0, [ir.Step("recv", ir.Loc("i", 0), ir.Loc("o", 0)),
                                                 ir.Step("send", ir.Loc("i", 0), ir.Loc("o", 0))])
    alg = ir.Algorithm("recv-first", "custom", "Simple", False, 2, 1, 1,
                       [ir.Gpu(0, 1, 1, 0, [tb(1)]), ir.Gpu(1, 1, 1, 0, [tb(0)])])
    with pytest.raises(MscclDeadlockError):
        shm.run(alg, [np.ones(2), np.ones(2)], timeout=0.3)


def test_process_group_closes_ranks_stuck_outside_collectives():
    def sleeper(rt, conn):
        time.sleep(60)
    group = ProcessGroup(2)
    group.start(sleeper)
    group.close(timeout=0.2)
    assert not group.procs


def _rank_0_returns_early(comm):
    comm.all_reduce(np.ones(4))
    if comm.rank != 0:
        comm.all_reduce(np.ones(4))


def _root_returns_early(comm):
    if comm.rank != 0:
        comm.broadcast(None, root=0)


@pytest.mark.parametrize("fn", [_rank_0_returns_early, _root_returns_early])
def test_rank_that_returns_early_fails_the_others_fast(fn):
    t0 = time.monotonic()
    with pytest.raises(MscclRuntimeError, match=r"but rank 0 returned after 1|rank 0 returned "
                                                 r"after 0 calls"):
        msccl_py.launch(fn, 3, timeout=60)
    assert time.monotonic() - t0 < 20


def _waits_for_a_late_rank(comm):
    x = np.ones(1024, dtype=np.float32)
    comm.all_reduce(x)      # the program is chosen and compiled before the timed wait
    comm.barrier()
    if comm.rank == 0:
        time.sleep(1.0)
    wall, cpu = time.monotonic(), time.process_time()
    comm.all_reduce(x)
    return time.monotonic() - wall, time.process_time() - cpu


def test_waiting_ranks_sleep_instead_of_spinning():
    # 8 ranks on this 2-core machine: the 7 that wait for rank 0 must not burn the CPU
    res = msccl_py.launch(_waits_for_a_late_rank, 8)
    for r, (wall, cpu) in enumerate(res[1:], start=1):
        assert wall > 0.5, f"rank {r} did not wait for rank 0"
        assert cpu < 0.25 * wall, f"rank {r} used {cpu:.2f} s of CPU while waiting {wall:.2f} s"


def test_pool_rank_killed_between_calls_is_reported_then_replaced():
    from msccl_py.runtime import shm_fallback
    alg = shm_fallback.allreduce_ring(4)
    xs = [np.ones(8) * r for r in range(4)]
    shm.run(alg, xs)
    pool = next(iter(shm._pools.values()))
    victim = pool.group.procs[2]
    os.kill(victim.pid, signal.SIGKILL)
    victim.join(5)
    with pytest.raises(MscclRuntimeError, match=r"rank 2 died \(killed by signal SIGKILL\)"):
        shm.run(alg, xs)
    np.testing.assert_array_equal(shm.run(alg, xs)[3], np.full(8, 6.0))
    shm.close()
