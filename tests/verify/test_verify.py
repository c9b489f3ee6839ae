"""Symbolic data, postconditions, deadlock regimes and the verdict."""

import copy

import pytest

from msccl_py import ir
from msccl_py.errors import VerificationError
from msccl_py.plan.geometry import geometry
from msccl_py.verify import safe_max_bytes, verify
from msccl_py.verify.samples import allpairs_allreduce, ring_allgather, ring_allreduce

L = ir.Loc


def alltoall(R=3):
    gpus = []
    for r in range(R):
        tbs = []
        for k, p in enumerate(q for q in range(R) if q != r):
            tbs.append(ir.Threadblock(k, send_peer=p, recv_peer=p, channel=0, steps=[
                ir.Step("send", L("i", p), L("o", r)), ir.Step("recv", L("i", r), L("o", p))]))
        tbs.append(ir.Threadblock(R - 1, steps=[ir.Step("copy", L("i", r), L("o", r))]))
        gpus.append(ir.Gpu(r, R, R, 0, tbs))
    return ir.Algorithm("a2a", "alltoall", "LL", False, R, R, 1, gpus, outofplace=True)


def reduce_scatter(R=3):
    gpus = []
    for r in range(R):
        peers = [q for q in range(R) if q != r]
        tbs = [ir.Threadblock(k, send_peer=p, recv_peer=p, steps=[
            ir.Step("send", L("i", p), L("s", r)),
            ir.Step("recv", L("i", r), L("s", p), has_dependents=True)])
            for k, p in enumerate(peers)]
        red = [ir.Step("copy", L("i", r), L("o", 0))]
        red += [ir.Step("reduce", L("s", p), L("o", 0), depends=[(k, 1)])
                for k, p in enumerate(peers)]
        tbs.append(ir.Threadblock(len(peers), steps=red))
        gpus.append(ir.Gpu(r, R, 1, R, tbs))
    return ir.Algorithm("rs", "reduce_scatter", "Simple", False, R, R, 1, gpus, outofplace=True)


def shift(R=3):
    """Custom: rank r's output chunk 0 gets rank r-1's input chunk 0."""
    gpus = [ir.Gpu(r, 1, 1, 0, [ir.Threadblock(0, send_peer=(r + 1) % R, recv_peer=(r - 1) % R,
                                               steps=[ir.Step("send", L("i", 0), L("o", 0)),
                                                      ir.Step("recv", L("i", 0), L("o", 0))])])
            for r in range(R)]
    return ir.Algorithm("shift", "custom", "LL", False, R, 1, 1, gpus, outofplace=True)


@pytest.mark.parametrize("make", [lambda: ring_allreduce(4, 2), lambda: ring_allgather(4),
                                  alltoall, reduce_scatter, lambda: allpairs_allreduce(3, "LL")])
def test_correct_algorithms_are_ok(make):
    v = verify(make(), target="msccl")
    assert v.status == "ok", v.report()
    assert all(r.deadlock_free for r in v.regimes.values())
    assert str(v).startswith("ok: ")


def test_missing_contribution_names_chunk_value_and_writer():
    alg = ring_allreduce(3)
    alg.gpus[1].threadblocks[0].steps[1].op = "recv_copy_send"
    v = verify(alg, target="msccl")
    assert v.status == "incorrect"
    assert v.reason == ("rank 0 output chunk 0 holds {(0,0) (2,0)} but should hold "
                        "{(0,0) (1,0) (2,0)} (missing (1,0)); last written by rank 0 tb 0 step 3 "
                        "(recv_copy_send); 3 chunks wrong (in-place call)")
    assert v.errors[0].kind == "data"


def test_double_count_is_caught():
    alg = ring_allreduce(2)
    alg.gpus[0].threadblocks[0].steps.insert(0, ir.Step("reduce", L("i", 1), L("i", 1)))
    v = verify(alg, target="msccl")
    assert v.status == "incorrect" and "extra (0,1)" in v.reason


def test_uninitialized_read():
    alg = ring_allgather(3)
    for gpu in alg.gpus:
        gpu.threadblocks[1].steps[0].dst = L("o", (gpu.rank + 1) % 3)
    v = verify(alg, target="msccl")
    assert v.status == "incorrect" and "holds uninitialized data" in v.reason


def test_schedule_dependent_result_is_a_race():
    alg = ring_allgather(3)
    for gpu in alg.gpus:   # copy first, ring second, and no dependency between them
        ring, cp = gpu.threadblocks
        ring.id, cp.id = 1, 0
        ring.steps[0].depends = []
        cp.steps[0].has_dependents = False
        gpu.threadblocks = [cp, ring]
    v = verify(alg, target="msccl")
    assert v.status == "incorrect"
    assert v.reason.startswith("data race on rank 0 o[0]: tb 0 step 0 (copy) writes it and "
                               "tb 1 step 0 (send) reads it with no dependency")


def test_inplace_and_outofplace_checked_separately():
    alg = ring_allgather(3)
    alg.inplace = True
    v = verify(alg, target="msccl")
    assert v.ok and "(in-place, out-of-place)" in v.reason
    # reading the input buffer after it was overwritten only breaks the in-place call
    alg2 = ring_allreduce(2)
    alg2.outofplace, alg2.inplace = True, False
    for g in alg2.gpus:
        g.threadblocks[0].steps[-1].dst = L("o", g.threadblocks[0].steps[-1].dst.offset)
    assert verify(alg2, target="msccl").status == "incorrect"


def test_broadcast_and_reduce_roots():
    alg = copy.deepcopy(alltoall())
    # a broadcast from rank 1: rank 1 sends its two chunks to 0 and 2, copies locally
    L1 = [ir.Threadblock(0, send_peer=0, steps=[ir.Step("send", L("i", 0), L("o", 0), 2)]),
          ir.Threadblock(1, send_peer=2, steps=[ir.Step("send", L("i", 0), L("o", 0), 2)]),
          ir.Threadblock(2, steps=[ir.Step("copy", L("i", 0), L("o", 0), 2)])]
    rcv = lambda: [ir.Threadblock(0, recv_peer=1, steps=[ir.Step("recv", L("i", 0), L("o", 0), 2)])]
    alg = ir.Algorithm("bc", "broadcast", "Simple", False, 3, 2, 1,
                       [ir.Gpu(0, 2, 2, 0, rcv()), ir.Gpu(1, 2, 2, 0, L1), ir.Gpu(2, 2, 2, 0, rcv())])
    assert verify(alg, target="msccl", root=1).ok
    v = verify(alg, target="msccl")     # MSCCL XML has no root: 0 is assumed
    assert v.status == "incorrect" and "should hold {(0,0)}" in v.reason


def test_custom_postconditions():
    alg = shift()
    v = verify(alg, target="msccl")
    assert v.ok and "no postcondition" in v.reason
    want = {(r, 0): [((r - 1) % 3, 0)] for r in range(3)}
    assert verify(alg, target="msccl", postcondition=want).ok
    assert verify(alg, target="msccl", postcondition=lambda r, k: [((r - 1) % 3, 0)]).ok
    wrong = {(r, "o", 0): [((r + 1) % 3, 0)] for r in range(3)}
    v = verify(alg, target="msccl", postcondition=wrong)
    assert v.status == "incorrect" and "should hold {(1,0)}" in v.reason


class FakeChunk:
    def __init__(self, r, i):
        self.origin_rank, self.origin_index = r, i
        self.chunks = (self,)

    def __eq__(self, other):
        return isinstance(other, FakeChunk) and (self.origin_rank, self.origin_index) == (
            other.origin_rank, other.origin_index)


class FakeShift:
    """Duck-typed like msccl_py.language's Collective (init_buffers + check)."""

    num_ranks = 3

    def init_buffers(self):
        return [{"i": [FakeChunk(r, 0)], "o": [None]} for r in range(3)]

    def check(self, prog):
        return all(prog.buffers[r]["o"][0] == FakeChunk((r - 1) % 3, 0) for r in range(3))


def test_collective_object_as_postcondition():
    assert verify(shift(), target="msccl", postcondition=FakeShift()).ok


def test_language_collective_if_available():
    collectives = pytest.importorskip("msccl_py.language.collectives")
    coll = collectives.AllGather(4, 1, False)
    assert verify(ring_allgather(4), target="msccl", postcondition=coll).ok
    bad = ring_allgather(4)
    bad.gpus[2].threadblocks[0].steps[-1].op = "recv"
    bad.gpus[2].threadblocks[0].steps[-1].dst = L("o", 0)
    v = verify(bad, target="msccl", postcondition=coll)
    assert v.status == "incorrect"


def test_regimes_and_maxbytes():
    alg = allpairs_allreduce(3)        # sends of 3 chunks: deadlock with large messages
    v = verify(alg, target="msccl")
    assert v.status == "deadlock" and v.regimes["small"].deadlock_free
    cyc = v.regimes["large"].cycle
    assert [(w.rank, w.tb, w.step, w.op) for w in cyc] == [(0, 0, 0, "send"), (1, 0, 0, "send")]
    assert "deadlocks with large messages: rank 0 tb 0 step 0 (send, iteration 0) waits for " \
           "room in the FIFO to rank 1 tb 0 on channel 0 (full: 2 transfers)" in v.reason
    bound = safe_max_bytes(alg, v)
    assert bound == 9 * (geometry("Simple").iter_bytes // 3)
    assert safe_max_bytes(alg, v, buffsize=1 << 20) == 9 * ((1 << 20) // 8 * 4 // 3)
    alg.max_bytes = bound                # the compiler's bound makes large sizes unreachable
    v2 = verify(alg, target="msccl")
    assert v2.ok and not v2.regimes["large"].reachable
    assert "maxBytes" in v2.reason
    top = bound // 36 * 36               # the largest float32 call size within the bound
    assert verify(alg, target="msccl", nbytes=top).ok
    # just above it a send of 3 chunks is 2 transfers of 2 and 1 chunks: still fits
    mid = verify(alg, target="msccl", nbytes=top + 36)
    assert mid.ok and mid.regimes["large"].max_allowed_count == 2
    # a chunk per transfer (4 MiB chunks): 3 transfers per send, FIFO holds 2
    assert verify(alg, target="msccl", nbytes=9 * (4 << 20)).status == "deadlock"


def test_safe_max_bytes_when_nothing_is_safe():
    alg = ring_allgather(3)
    alg.gpus[0].threadblocks[1].steps[0].depends = [(0, 0)]
    alg.gpus[0].threadblocks[0].steps[0].has_dependents = True
    v = verify(alg, target="msccl")
    assert v.status == "deadlock"
    assert "waits for rank 0 tb 1 to publish step 0 of iteration 0" in v.reason
    with pytest.raises(VerificationError, match="no message size is deadlock-free"):
        safe_max_bytes(alg, v)
    assert safe_max_bytes(ring_allreduce(2), verify(ring_allreduce(2), target="msccl")) is None


def test_iterations_modelled_per_regime():
    # counts of 1: both regimes run two pipeline iterations
    v = verify(ring_allreduce(2), target="msccl")
    assert v.regimes["large"].iterations == 2 and v.regimes["small"].iterations == 2
    # a step of 3 chunks fits one transfer only when a chunk is under a third of an
    # iteration's slice, so a small call has exactly one iteration
    v = verify(allpairs_allreduce(3, "LL"), target="msccl")
    assert v.regimes["small"].iterations == 1 and v.regimes["small"].max_allowed_count == 3
    assert v.regimes["large"].iterations == 2 and v.regimes["large"].max_allowed_count == 1


def test_verify_of_a_large_ring_is_ok():
    # 7,936 steps; how long it takes is benchmarks/verify_scale.py's to measure
    assert verify(ring_allreduce(16, channels=16), target="msccl").ok
