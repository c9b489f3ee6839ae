"""The stalled-rank report: what each unfinished threadblock waits on (XML calls here; MSCCL++
plan stalls are checked end to end in tests/targets/mscclpp/test_shm.py)."""

from __future__ import annotations

import numpy as np
import pytest

from msccl_py.runtime import shm_fallback as F
from msccl_py.runtime.shm_control import ControlWords
from msccl_py.runtime.shm_program import rank_program
from msccl_py.runtime.shm_report import barrier_wait, stalled, xml_wait_report
from msccl_py.runtime.shm_threadblocks import W_DEP, W_ENTER_RECV, W_NONE, W_RECV, call_template


@pytest.fixture
def arena(make_arena):
    return make_arena(2, 1 << 14)


def test_the_frame_skips_finished_threadblocks_and_names_runnable_ones():
    assert stalled([None, ("tb 1", None), ("tb 2", "waits for x")]) == \
        "tb 1 is runnable\ntb 2 waits for x"
    assert stalled([None, None]) == stalled([]) == "all threadblocks finished"
    assert barrier_wait(iter([2, 0])) == "waits in barrier for ranks 0, 2"


def test_wait_report_says_what_each_threadblock_waits_for(arena):
    prog = rank_program(F.allreduce_ring(2, channels=2), 0, world_size=2)
    t = call_template(prog, 64, np.dtype(np.float32), arena)
    ctl = ControlWords(arena.words, arena.layout)
    ctl.publish(1, 3, (1, 64, 1, 0, 0, 7, 0))
    a, b = t.tbs
    a.it, a.si, a.wait = 0, 1, W_ENTER_RECV
    b.it, b.si, b.wait, b.wdep = 0, 2, W_DEP, (0, 1)
    assert xml_wait_report(t, 4, ctl).splitlines() == [
        "tb 0 (channel 0, send 1, recv 1) iteration 1/1 step 1 (recv_reduce_copy_send, "
        "count 1) waits for rank 1 to enter call #4 (it is at call #3)",
        "tb 1 (channel 1, send 1, recv 1) iteration 1/1 step 2 (recv, count 1) waits for tb 0 "
        "to finish step 1 of iteration 1"]
    arena.words[b.rtail_w] = 5
    b.wait, b.rhead = W_RECV, 5
    a.it = 1                                          # finished: not reported
    assert xml_wait_report(t, 4, ctl) == (
        "tb 1 (channel 1, send 1, recv 1) iteration 1/1 step 2 (recv, count 1) waits for data "
        "from rank 1 on channel 1 (transfers consumed 5, posted by the sender 5)")
    b.wait = W_NONE
    assert xml_wait_report(t, 4, ctl).endswith("is runnable")
    b.it = 1
    assert xml_wait_report(t, 4, ctl) == xml_wait_report(None, 4, ctl) == "all threadblocks finished"
