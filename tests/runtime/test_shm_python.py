"""The shm Python executor: its op dispatch against the plan tables, both loops, its report.

The in-process tests drive one rank whose threadblock sends to itself, so a
whole call runs without starting processes.
"""

from __future__ import annotations

import multiprocessing as mp
import os

import numpy as np
import pytest

from msccl_py import ir
from msccl_py.errors import MscclDeadlockError
from msccl_py.ir import Loc, Step, Threadblock
from msccl_py.plan import tables as P
from msccl_py.runtime import shm_native
from msccl_py.runtime.shm_exec import RankRuntime
from msccl_py.runtime.shm_program import rank_program
from msccl_py.runtime.shm_python import MOVES


@pytest.mark.parametrize("op", range(len(P.OP_NAMES)), ids=P.OP_NAMES)
def test_each_move_writes_what_the_op_tables_say(op):
    rng = np.random.default_rng(op)
    src, dst, acc, rs, ss = (rng.integers(1, 50, 6).astype(np.float64) for _ in range(5))
    before = {k: v.copy() for k, v in dict(src=src, dst=dst, acc=acc, rs=rs, ss=ss).items()}
    recv, send = bool(P.IS_RECV[op]), bool(P.IS_SEND[op])
    local = not (recv or send)
    MOVES[op](np.multiply, src if P.LOCAL_SRC[op] else None, dst if P.LOCAL_DST[op] else None,
              acc if op == P.OP_REDUCE else None, rs if recv else None, ss if send else None)
    # the value the op computes: received (or accumulated) data combined with the source
    other = before["acc"] if local else before["rs"]
    value = other * before["src"] if P.IS_REDUCE[op] else (
        before["src"] if op in (P.OP_SEND, P.OP_COPY) else before["rs"])
    want = dict(before)
    if P.LOCAL_DST[op]:
        want["dst"] = value
    if send:
        want["ss"] = value
    got = dict(src=src, dst=dst, acc=acc, rs=rs, ss=ss)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=f"{P.OP_NAMES[op]}: {name}")


def _self_loop(steps: list[Step], local: list[Step] = ()) -> ir.Algorithm:
    """One rank, a threadblock on channel 0 that sends to and receives from itself."""
    tbs = [Threadblock(0, 0, 0, 0, steps)]
    if local:
        tbs.append(Threadblock(1, -1, -1, 0, list(local)))
    return ir.Algorithm("selfloop", "custom", "Simple", False, 1, 4, 1,
                        [ir.Gpu(0, 4, 4, 1, tbs)], outofplace=True)


@pytest.fixture
def rank(monkeypatch, make_arena):
    """A factory of in-process one-rank runtimes, by executor and FIFO size."""

    def make(executor: str, buffsize: int, timeout: float = 30.0) -> RankRuntime:
        monkeypatch.setenv(shm_native.ENV_MODE, executor)
        return RankRuntime(make_arena(1, buffsize), 0, 1, [mp.Semaphore(0)], mp.Lock(), timeout,
                           os.getppid())

    return make


def _call(rt: RankRuntime, prog, bufs, S: int, op: str = "sum") -> None:
    rt.enter((10, S, 1, 0, 0, 1, 0))
    try:
        rt.execute(prog, bufs, S, np.dtype(np.float32), op)
    finally:
        rt.leave()


@pytest.mark.parametrize("S, buffsize", [(24, 1 << 20), (3000, 1 << 12)],
                         ids=["one-iteration", "many-iterations"])
def test_both_loops_run_every_op(rank, S, buffsize):
    alg = _self_loop([Step("send", Loc("i", 0), Loc("o", 0)),
                      Step("recv_reduce_send", Loc("i", 1), Loc("i", 1)),
                      Step("recv_reduce_copy_send", Loc("i", 2), Loc("o", 2)),
                      Step("recv_copy_send", Loc("o", 1), Loc("o", 1)),
                      Step("recv_reduce_copy", Loc("i", 3), Loc("o", 3)),
                      Step("send", Loc("i", 3), Loc("o", 3)),
                      Step("recv", Loc("o", 0), Loc("o", 0))],
                     [Step("copy", Loc("i", 0), Loc("s", 0)),
                      Step("reduce", Loc("i", 1), Loc("s", 0))])
    prog = rank_program(alg, 0, 1)
    rt = rank("python", buffsize)
    assert (rt._template(prog, S, np.dtype(np.float32)).iterations > 1) == (S > 1000)
    x = np.arange(4 * S, dtype=np.float32)
    c = [x[k * S:(k + 1) * S] for k in range(4)]
    out, scratch = np.full(4 * S, -1, np.float32), np.full(S, -1, np.float32)
    for _ in range(2):           # the second call reuses the template (and cached views)
        _call(rt, prog, [x, out, scratch], S)
        np.testing.assert_array_equal(out, np.concatenate(
            [c[3], c[0] + c[1] + c[2], c[0] + c[1] + c[2], c[0] + c[1] + c[2] + c[3]]))
        np.testing.assert_array_equal(scratch, c[0] + c[1])


def _stuck(rank, executor: str) -> str:
    # three sends into a FIFO of two transfers before the receives: the third cannot move
    alg = _self_loop([Step("send", Loc("i", k), Loc("o", k)) for k in range(3)] +
                     [Step("recv", Loc("i", k), Loc("o", k)) for k in range(3)])
    rt = rank(executor, 1 << 16, timeout=0.3)
    S = 16
    with pytest.raises(MscclDeadlockError) as err:
        _call(rt, rank_program(alg, 0, 1), [np.zeros(4 * S, np.float32),
                                            np.zeros(4 * S, np.float32),
                                            np.zeros(0, np.float32)], S)
    return str(err.value)


def test_a_stuck_call_reports_where_each_threadblock_waits(rank):
    msg = _stuck(rank, "python")
    assert msg.startswith("rank 0: no progress for 0.3 s in call #1 run(count=16, "
                          "dtype=float32, op=sum, program#1); first noticed by rank 0:\n")
    assert msg.endswith("tb 0 (channel 0, send 0, recv 0) iteration 1/1 step 2 (send, count 1) "
                        "waits for FIFO space towards rank 0 on channel 0 (posted 2, receiver "
                        "consumed 0)")


@pytest.mark.skipif(shm_native.library() is None, reason="the native executor cannot be built")
def test_the_native_executor_reports_a_stuck_call_as_the_python_one_does(rank):
    assert _stuck(rank, "native") == _stuck(rank, "python")
