"""The shm arena's control words by name: descriptors, the abort record, describe()."""

from __future__ import annotations

import pytest

from msccl_py.transport import shm_arena as A
from msccl_py.runtime.shm_control import (COLLECTIVES, DTYPES, OPS, CallDescriptor,
                                          ControlWords, describe)


@pytest.fixture
def arena(make_arena):
    return make_arena(3, 1 << 12)


def test_a_published_descriptor_is_read_back_until_its_slot_is_reused(arena):
    ctl = ControlWords(arena.words, arena.layout)
    desc = CallDescriptor(COLLECTIVES.index("broadcast"), 96, DTYPES.index("int32"), 0, 2, 0xbeef)
    ctl.publish(1, 5, desc)
    assert ctl.seq(1) == 5 and arena.words[arena.layout.seq_word(1)] == 5
    assert ctl.descriptor(1, 5) == desc
    assert ctl.seq(0) == 0 and ctl.descriptor(0, 5) is None      # other ranks untouched
    later = desc._replace(count=7)
    ctl.publish(1, 5 + A.HIST, later)                              # same slot, HIST calls on
    assert ctl.descriptor(1, 5) is None
    assert ctl.descriptor(1, 5 + A.HIST) == later


def test_abort_record_and_rank_words(arena):
    ctl = ControlWords(arena.words, arena.layout)
    assert ctl.abort_code == 0 and ctl.abort_record() == (0, 0, 0)
    ctl.set_abort(A.ABORT_DEADLOCK, 2, 17)
    assert ctl.abort_code == A.ABORT_DEADLOCK
    assert ctl.abort_record() == (A.ABORT_DEADLOCK, 2, 17)
    assert not ctl.done(2)
    ctl.set_done(2)
    assert ctl.done(2) and arena.words[arena.layout.done_word(2)] == 1
    arena.words[arena.layout.sleep_word(0)] = 0b110
    assert ctl.sleep_mask(0) == 0b110 and ctl.sleep_word(0) == arena.layout.sleep_word(0)
    ctl.set_report_length(1, 40)
    assert arena.words[arena.layout.report_len_word(1)] == 40


def test_describe_names_what_each_collective_takes():
    code = COLLECTIVES.index
    assert describe((0, 0, 0, 0, 0, 0, 0)) == "barrier()"
    assert describe((code("reduce"), 8, DTYPES.index("float16"), OPS.index("max"), 3, 0x1f,
                     0)) == "reduce(count=8, dtype=float16, op=max, root=3, program#1f)"
    assert describe((code("allgather"), 4, 1, 9, 9, 0, 0)) == \
        "allgather(count=4, dtype=float32, program#0)"
    assert describe((99, 1, 77, 42, 0, 0, 0)) == "collective#99(count=1, dtype=77, program#0)"
