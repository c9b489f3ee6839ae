"""The instruction DAG's builder."""

from __future__ import annotations

from msccl_py.compiler.dag import Dag, Instr
from msccl_py.compiler.trace import Op


def _every_kind_of_operation() -> Dag:
    ops = [
        Op("copy", 0, "i", 0, 1, "o", 0, 1),          # single-chunk transfer
        Op("reduce", 1, "o", 0, 0, "i", 0, 1),        # single-chunk reducing transfer
        Op("copy", 0, "i", 0, 0, "o", 0, 2),          # local copy, two chunks
        Op("reduce", 0, "o", 0, 0, "i", 0, 1),        # local reduce
        Op("copy", 0, "i", 0, 1, ("s", "t"), 0, 2),   # multi-chunk transfer into scratch
        Op("reduce", 1, ("s", "t"), 0, 0, "o", 0, 2),  # multi-chunk reducing transfer
    ]
    sizes = [{"i": 2, "o": 2, "s": 0}, {"i": 2, "o": 2, "s": 2}]
    return Dag(ops, sizes, [{}, {("s", "t"): 0}])


def test_the_builder_sets_every_slot_of_every_instruction():
    """Instructions are made without ``__init__``: each slot must be set where they are made."""
    dag = _every_kind_of_operation()
    assert [i.op for i in dag.instrs] == ["send", "recv", "send", "recv_reduce_copy", "copy",
                                          "reduce", "send", "recv", "send", "recv_reduce_copy"]
    for ins in dag.instrs:
        unset = [s for s in Instr.__slots__ if not hasattr(ins, s)]
        assert not unset, (ins.id, ins.op, unset)
    n = len(dag.instrs)
    assert len(dag.reader) == len(dag.nreaders) == len(dag.overwritten) == n
    assert dag.carrier == list(range(n))
    span = len(dag.ops) + 1
    assert dag.scale >= n
    assert dag.prio == [(i.level * span + i.seq) * dag.scale + i.id for i in dag.instrs]


def test_rounds_and_hazards():
    dag = _every_kind_of_operation()
    ins = dag.instrs
    assert [i.level for i in ins] == [0, 0, 1, 1, 2, 2, 2, 2, 3, 3]
    # rank 0's i[0]: written by the reducing receive 3, read by the local copy 4, then
    # read and overwritten by the local reduce 5 (which waits for both)
    assert list(ins[4].preds) == [3]
    assert sorted(ins[5].preds) == [3, 4]
    assert dag.reader[3] == 5 and dag.nreaders[3] == 2 and dag.overwritten[3] == 1
    assert sorted(ins[9].preds) == [4, 5]  # o[0..1]'s writer (the copy), o[0]'s reader
    assert all(p < i.id for i in ins for p in i.preds)
