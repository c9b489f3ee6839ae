"""Threadblock state of a call shape: where its FIFOs live, and the report of its waits."""

from __future__ import annotations

import numpy as np
import pytest

from msccl_py.plan.geometry import call_geometry
from msccl_py.runtime import shm_fallback as F
from msccl_py.runtime.shm_control import ControlWords
from msccl_py.runtime.shm_program import rank_program
from msccl_py.runtime.shm_threadblocks import (W_DEP, W_ENTER_RECV, W_NONE, W_RECV,
                                               call_template, wait_report)


@pytest.fixture
def arena(make_arena):
    return make_arena(2, 1 << 14)


def test_template_follows_the_geometry_and_the_arena_layout(arena):
    prog = rank_program(F.allreduce_ring(2, channels=2), 1, world_size=2)
    S, dtype = 5000, np.dtype(np.float32)
    t = call_template(prog, S, dtype, arena)
    cg = call_geometry(prog.protocol, prog.nchunksperloop, S, dtype.itemsize, buffsize=1 << 14)
    assert (t.iterations, t.iter_elems, t.max_count, t.fifo_transfers) == \
        (cg.iterations, cg.iter_elems, cg.max_allowed_count, cg.fifo_transfers)
    lay = arena.layout
    for idx, (st, tb) in enumerate(zip(t.tbs, prog.tbs)):
        assert (st.prog, st.idx, st.nsteps, st.speer, st.rpeer) == \
            (tb, idx, len(tb.steps), 0, 0)
        assert (st.stail_w, st.shead_w) == (lay.tail_word(tb.send_conn),
                                            lay.head_word(tb.send_conn))
        assert (st.rtail_w, st.rhead_w) == (lay.tail_word(tb.recv_conn),
                                            lay.head_word(tb.recv_conn))
        assert st.ssleep_w == st.rsleep_w == lay.sleep_word(0)
        assert st.sfifo.shape[0] == st.rfifo.shape[0] == cg.fifo_transfers
        # the send FIFO's rows are the arena's pages of that connection
        st.sfifo[1, 0] = 2.5
        offset = lay.fifo(tb.send_conn) + st.sfifo.shape[1] * dtype.itemsize
        assert np.frombuffer(arena.map, dtype, 1, offset)[0] == 2.5


def test_wait_report_says_what_each_threadblock_waits_for(arena):
    prog = rank_program(F.allreduce_ring(2, channels=2), 0, world_size=2)
    t = call_template(prog, 64, np.dtype(np.float32), arena)
    ctl = ControlWords(arena.words, arena.layout)
    ctl.publish(1, 3, (1, 64, 1, 0, 0, 7, 0))
    a, b = t.tbs
    a.it, a.si, a.wait = 0, 1, W_ENTER_RECV
    b.it, b.si, b.wait, b.wdep = 0, 2, W_DEP, (0, 1)
    assert wait_report(t, 4, ctl).splitlines() == [
        "tb 0 (channel 0, send 1, recv 1) iteration 1/1 step 1 (recv_reduce_copy_send, "
        "count 1) waits for rank 1 to enter call #4 (it is at call #3)",
        "tb 1 (channel 1, send 1, recv 1) iteration 1/1 step 2 (recv, count 1) waits for tb 0 "
        "to finish step 1 of iteration 1"]
    arena.words[b.rtail_w] = 5
    b.wait, b.rhead = W_RECV, 5
    a.it = 1                                          # finished: not reported
    assert wait_report(t, 4, ctl) == (
        "tb 1 (channel 1, send 1, recv 1) iteration 1/1 step 2 (recv, count 1) waits for data "
        "from rank 1 on channel 1 (transfers consumed 5, posted by the sender 5)")
    b.wait = W_NONE
    assert wait_report(t, 4, ctl).endswith("is runnable")
    b.it = 1
    assert wait_report(t, 4, ctl) == wait_report(None, 4, ctl) == "all threadblocks finished"
