"""Static and connection rules: each rule fires with the rank, threadblock and step."""

import copy
from functools import partial

import pytest

from msccl_py import ir
from msccl_py.verify import verify
from msccl_py.verify.samples import ring_allgather, ring_allreduce
from msccl_py.plan.static import check_static, unused_flags
from msccl_py.targets.msccl.dialects import check_limits


def reason(alg, target="msccl"):
    v = verify(alg, target=target)
    assert v.status == "invalid", v.report()
    return v.reason


def mutated(fn, base=None):
    alg = copy.deepcopy(base or ring_allgather(3))
    fn(alg)
    return alg


def test_sound_samples_have_no_findings():
    assert check_static(ring_allreduce(3)) == []
    assert check_static(ring_allgather(3), partial(check_limits, target="msccl-executor")) == []


@pytest.mark.parametrize("edit,text", [
    (lambda a: setattr(a, "ngpus", 4), "ngpus is 4 but 3 gpus are listed"),
    (lambda a: setattr(a, "ngpus", 0), "ngpus must be at least 1, got 0"),
    (lambda a: setattr(a, "min_bytes", 4096) or setattr(a, "max_bytes", 1024),
     "minBytes=4096 exceeds maxBytes=1024"),
    (lambda a: setattr(a.gpus[1], "rank", 2), "gpu at position 1 has id 2"),
    (lambda a: setattr(a.gpus[1], "output_chunks", 5), "o_chunks=5 but allgather"),
    (lambda a: setattr(a, "protocol", "Fast"), "unknown protocol 'Fast'"),
    (lambda a: setattr(a.gpus[0].threadblocks[1], "id", 3),
     "threadblock ids must be dense from 0 (missing id 1)"),
    (lambda a: setattr(a.gpus[0].threadblocks[0], "send_peer", 0),
     "rank 0 tb 0: send peer 0 is not another rank"),
    (lambda a: setattr(a.gpus[2].threadblocks[0], "channel", 3),
     "rank 2 tb 0: channel 3 outside 0..0"),
    (lambda a: setattr(a.gpus[1].threadblocks[0].steps[1], "count", 72),
     "rank 1 tb 0 step 1: count 72"),
    (lambda a: setattr(a.gpus[1].threadblocks[0].steps[1], "dst", ir.Loc("o", 3)),
     "rank 1 tb 0 step 1: destination o[3:4] is out of bounds: buffer o has 3 chunks"),
    (lambda a: setattr(a.gpus[1].threadblocks[0].steps[1], "dst", ir.Loc("s", 0)),
     "destination s[0:1] is out of bounds: buffer s has 0 chunks"),
    (lambda a: setattr(a.gpus[1].threadblocks[1].steps[0], "src", None),
     "rank 1 tb 1 step 0: copy needs a local source operand"),
    (lambda a: a.gpus[0].threadblocks[0].steps[0].depends.append((5, 0)),
     "rank 0 tb 0 step 0: depends on threadblock 5, which rank 0 does not have"),
    (lambda a: setattr(a.gpus[0].threadblocks[0].steps[0], "depends", [(1, 4)]),
     "depends on tb 1 step 4, but that threadblock has 1 steps"),
    (lambda a: setattr(a.gpus[0].threadblocks[1].steps[0], "has_dependents", False),
     "depends on tb 1 step 0, which does not publish a flag"),
    (lambda a: setattr(a.gpus[0].threadblocks[1], "send_peer", -1) or
     a.gpus[0].threadblocks[1].steps.append(ir.Step("send", ir.Loc("i", 0))),
     "rank 0 tb 1 step 1: send-type step in a threadblock without a send peer"),
    (lambda a: setattr(a.gpus[0].threadblocks[1], "send_peer", 1),
     "threadblocks 0 and 1 both send to rank 1 on channel 0"),
])
def test_rules(edit, text):
    assert text in reason(mutated(edit))


def test_limits_come_from_the_dialect():
    alg = ring_allreduce(40)  # 79 steps per threadblock
    assert verify(alg, target="msccl").status == "ok"
    assert "has 79 steps (nops included); target msccl-executor allows at most 64" in \
        reason(alg, "msccl-executor")


def test_fused_reduction_chain_needs_equal_counts():
    steps = [ir.Step("reduce", ir.Loc("s", 0), ir.Loc("o", 0), 2),
             ir.Step("reduce", ir.Loc("s", 2), ir.Loc("o", 0), 1)]
    alg = ir.Algorithm("x", "custom", "Simple", False, 1, 4, 1,
                       [ir.Gpu(0, 4, 4, 4, [ir.Threadblock(0, steps=steps)])])
    assert ("steps 0..1 fuse into one multi-source reduction but have different counts [1, 2]"
            in reason(alg))


def test_connection_mismatches():
    a = mutated(lambda a: setattr(a.gpus[1].threadblocks[0].steps[1], "count", 2))
    a.gpus[1].output_chunks = 3
    text = reason(a)
    assert "sends 1 chunks to rank 1 on channel 0, but rank 1 tb 0 step 1 receives 2" in text
    b = mutated(lambda a: a.gpus[2].threadblocks[0].steps.pop())
    assert "rank 1 tb 0 sends 2 times but rank 2 tb 0 receives 1 times" in reason(b)
    c = mutated(lambda a: setattr(a.gpus[1].threadblocks[0], "recv_peer", -1) or
                a.gpus[1].threadblocks[0].steps.__setitem__(
                    slice(None), [a.gpus[1].threadblocks[0].steps[0]]))
    assert "sends to rank 1 on channel 0, but no threadblock of rank 1 receives" in reason(c)


def test_unused_flags_are_warnings():
    alg = ring_allreduce(2)
    alg.gpus[0].threadblocks[0].steps[0].has_dependents = True
    assert [str(f) for f in unused_flags(alg)] == [
        "rank 0 tb 0 step 0: publishes a flag (hasdep=1) that no step waits on"]
    v = verify(alg, target="msccl")
    assert v.ok and len(v.warnings) == 1


def _step_mutants():
    """Sound samples, and copies with one step rule broken each (every kind the walk names)."""
    from msccl_py.verify.samples import allpairs_allreduce
    bases = [ring_allreduce(3), ring_allgather(3), allpairs_allreduce(3)]
    edits = [
        lambda s, tb: setattr(s, "count", 72),
        lambda s, tb: setattr(s, "count", -1),
        lambda s, tb: setattr(s, "src", ir.Loc("i", 99)),
        lambda s, tb: setattr(s, "dst", ir.Loc("s", 0)),
        lambda s, tb: setattr(s, "src", None),
        lambda s, tb: setattr(s, "dst", ir.Loc("x", 0)),
        lambda s, tb: setattr(tb, "send_peer", -1),
        lambda s, tb: setattr(s, "op", "send"),
        lambda s, tb: setattr(tb, "recv_peer", -1),
        lambda s, tb: s.depends.append((tb.id, 99)),
        lambda s, tb: s.depends.append((7, 0)),
        lambda s, tb: s.depends.append((tb.id, 0)),
        lambda s, tb: setattr(s, "op", "reduce"),
    ]
    for base in bases:
        yield base
        for edit in edits:
            for gi, ti in ((0, 0), (1, -1)):
                alg = copy.deepcopy(base)
                tb = alg.gpus[gi].threadblocks[ti]
                edit(tb.steps[-1], tb)
                yield alg


def test_step_rules_on_the_plan_columns_agree_with_the_walk():
    from msccl_py.plan.static import check_threadblocks, steps_sound
    from msccl_py.plan.tables import build_plan
    seen = set()
    for alg in _step_mutants():
        walked = check_threadblocks(alg)
        try:
            plan = build_plan(alg)
        except Exception:
            continue
        seen.add(steps_sound(plan))
        assert check_threadblocks(alg, plan) == walked
        if walked:
            assert not steps_sound(plan)
    assert seen == {True, False}
