"""Threadblock state of a call shape: where its FIFOs live."""

from __future__ import annotations

import numpy as np
import pytest

from msccl_py.plan.geometry import call_geometry
from msccl_py.runtime import shm_fallback as F
from msccl_py.runtime.shm_program import rank_program
from msccl_py.runtime.shm_threadblocks import call_template


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
