"""The compiler passes: fusion, threadblocks, channels, instances, dependencies."""

from __future__ import annotations

from collections import Counter

import pytest

from allgather_ring import allgather_ring
from allreduce_ring import allreduce_ring
from alltoall_allpairs import alltoall_allpairs
from msccl_py.compiler.dag import Dag
from msccl_py.compiler.trace import Op
from msccl_py.errors import CycleError
from msccl_py.language import *
from msccl_py.language.collectives import AllGather, AllReduce
from msccl_py.topologies import fully_connected
from msccl_py.verify import verify


def _ops(alg):
    return Counter(s.op for _, tb in alg.threadblocks() for s in tb.steps)


def _ok(alg, prog=None, root=0):
    post = prog.postcondition() if prog is not None and alg.collective == "custom" else None
    v = verify(alg, target="msccl", postcondition=post, root=root)
    assert v.status == "ok", str(v)
    return v


def test_ring_fusion_gives_the_classic_ring():
    n = 4
    alg = allreduce_ring(n).lower()
    ops = _ops(alg)
    # per chunk: one send, n-2 rrs, one rrcs, n-2 rcs, one recv
    assert ops == {"send": n, "recv_reduce_send": n * (n - 2), "recv_reduce_copy_send": n,
                   "recv_copy_send": n * (n - 2), "recv": n}
    for gpu in alg.gpus:
        (tb,) = gpu.threadblocks
        assert (tb.send_peer, tb.recv_peer) == ((gpu.rank + 1) % n, (gpu.rank - 1) % n)
        assert tb.steps[0].op == "send" and tb.steps[-1].op == "recv"
        assert len(tb.steps) == 2 * (n - 1) + 1
    _ok(alg)


def test_no_fusion_keeps_plain_sends_and_receives():
    with MSCCLProgram("ag", fully_connected(3), AllGather(3, 1, False), 1,
                      instr_fusion=False) as prog:
        for r in range(3):
            c = chunk(r, Buffer.input, 0).copy(r, Buffer.output, r)
            for hop in (1, 2):
                c = c.copy((r + hop) % 3, Buffer.output, r)
    alg = prog.lower()
    assert set(_ops(alg)) == {"copy", "send", "recv"}
    _ok(alg)


def test_manual_threadblocks_follow_sendtb_recvtb():
    alg = allreduce_ring(4, channels=2).lower()
    for gpu in alg.gpus:
        assert [tb.id for tb in gpu.threadblocks] == [0, 1]
        assert [tb.channel for tb in gpu.threadblocks] == [0, 1]
    _ok(alg)


def test_auto_threadblocks_one_per_connection():
    alg = alltoall_allpairs(4).lower()
    for gpu in alg.gpus:
        seen = set()
        for tb in gpu.threadblocks:
            for key in ((tb.channel, "s", tb.send_peer), (tb.channel, "r", tb.recv_peer)):
                if key[2] >= 0:
                    assert key not in seen
                    seen.add(key)
        assert len(seen) == 2 * 3
    _ok(alg)


@pytest.mark.parametrize("interleaved", [True, False])
def test_instances_replicate_chunks_channels_threadblocks(interleaved):
    n, inst = 4, 3
    base = allreduce_ring(n, channels=2, instances=1).lower()
    alg = allreduce_ring(n, channels=2, instances=inst).lower()
    assert alg.nchunksperloop == base.nchunksperloop * inst
    assert alg.nchannels == base.nchannels * inst
    for g, bg in zip(alg.gpus, base.gpus):
        assert len(g.threadblocks) == len(bg.threadblocks) * inst
        assert g.input_chunks == bg.input_chunks * inst
    _ok(alg)
    prog = allgather_ring(3, channels=2, instances=2)
    _ok(prog.lower())


def test_batched_replication():
    n = 3
    with MSCCLProgram("ar", fully_connected(n), AllReduce(n, 2, True), 2,
                      interleaved_replication=False) as prog:
        for k in range(2):
            for r in range(1, n):
                chunk(0, Buffer.input, k).reduce(chunk(r, Buffer.input, k))
            for r in range(1, n):
                chunk(0, Buffer.input, k).copy(r, Buffer.input, k)
    alg = prog.lower()
    sends = {s.src.offset for _, tb in alg.threadblocks() for s in tb.steps if s.op == "send"}
    assert sends == {0, 1, 2, 3}         # instance 1 of chunk k lives at k + 2
    _ok(alg)
    from msccl_py.errors import ProgramError
    from msccl_py.language.collectives import AllToAll
    with pytest.raises(ProgramError, match="block layout"):
        MSCCLProgram("a2a", fully_connected(n), AllToAll(n, 1, False), 2,
                     interleaved_replication=False)


def test_dependencies_cross_threadblocks_and_are_pruned():
    # rank 2 receives two chunks from different peers (two threadblocks) and
    # reduces them locally: the reduce waits on the other threadblock once
    from msccl_py.language.collectives import Reduce
    with MSCCLProgram("dep", fully_connected(3), Reduce(3, 1, False, root=2), 1) as prog:
        a = chunk(0, Buffer.input, 0).copy(2, "a")
        b = chunk(1, Buffer.input, 0).copy(2, "b")
        a.reduce(b)
        a.reduce(chunk(2, Buffer.input, 0))
        a.copy(2, Buffer.output, 0)
    alg = prog.lower()
    gpu = alg.gpus[2]
    reduces = [(tb, i, s) for tb in gpu.threadblocks for i, s in enumerate(tb.steps)
               if s.op == "reduce"]
    assert len(reduces) == 2
    tb, i, first = reduces[0]
    (dep,) = first.depends
    target = gpu.threadblocks[dep[0]].steps[dep[1]]
    assert dep[0] != tb.id and target.op == "recv" and target.has_dependents
    # the second reduce and the copy follow in program order: no repeated wait
    assert all(not s.depends for t, _, s in reduces[1:] if t is tb)
    _ok(alg, root=2)


def test_scratch_layout_packs_named_buffers():
    with MSCCLProgram("s", fully_connected(2), AllGather(2, 1, False), 2) as prog:
        c = chunk(0, Buffer.input, 0)
        c.copy(1, "a").copy(1, "b").copy(1, Buffer.output, 0)
        c.copy(0, Buffer.output, 0)
        d = chunk(1, Buffer.input, 0)
        d.copy(1, Buffer.output, 1)
        d.copy(0, Buffer.output, 1)
    alg = prog.lower()
    assert alg.gpus[1].scratch_chunks == 4      # two buffers x two instances
    offs = sorted({s.dst.offset for _, tb in alg.threadblocks() for s in tb.steps
                   if s.dst is not None and s.dst.buffer == "s"})
    assert offs == [0, 1, 2, 3]
    _ok(alg)


def test_cycle_is_reported_not_exited():
    from msccl_py.compiler import schedule
    ops = [Op("copy", 0, "i", 0, 0, "o", 0, 1), Op("copy", 0, "o", 0, 0, "i", 0, 1)]
    dag = Dag(ops, [{"i": 1, "o": 1}])
    a, b = dag.instrs
    a.preds.append(b.id)      # forge a back edge: b -> a -> b (the DAG never makes one)
    with pytest.raises(CycleError, match="cycle: copy on rank 0"):
        schedule.topological_order(dag, *schedule.connection_keys(False))


def _library_cases():
    from msccl_py import library
    return [(name, n, inst) for name in library.names() for n in (5, 8) for inst in (1, 2)]


@pytest.mark.parametrize("name,ranks,instances", _library_cases())
def test_sorted_order_shortcut_equals_the_topological_sort(name, ranks, instances):
    """``global_order``'s one-sort shortcut gives exactly the heap-driven sort's order."""
    from msccl_py.compiler import fusion, schedule, scratch
    from msccl_py.compiler.lower import gc_paused
    from msccl_py.errors import MscclError
    from msccl_py.library.build import build_program
    try:
        prog = build_program(name, ranks, instances=instances)
    except MscclError:
        pytest.skip(f"{name} does not run on {ranks} ranks")
    trace = prog._trace()
    offsets, totals = scratch.layout(trace.scratch_sizes, 1)
    sizes = [{"i": trace.input_sizes[r], "o": trace.output_sizes[r], "s": totals[r]}
             for r in range(trace.num_ranks)]
    dag = Dag(trace.ops, sizes, offsets)
    if trace.fusion:
        fusion.fuse(dag, trace.manual)
    keys = schedule.connection_keys(trace.manual)
    with gc_paused():
        while True:  # as the lowering does: unfuse what cannot stand, compare every round
            fast, bad_fast = schedule.global_order(dag, *keys)
            full, bad_full = schedule.topological_order(dag, *keys)
            assert [i.id for i in fast] == [i.id for i in full]
            assert bad_fast is bad_full
            carrier = list(range(len(dag.instrs)))  # each fused instruction carries its send
            for i in dag.instrs:
                if i.absorbed >= 0:
                    carrier[i.absorbed] = i.id
            assert dag.carrier == carrier
            if bad_full is None:
                break
            fusion.unfuse(dag, bad_full)


def test_compile_is_deterministic():
    a = allreduce_ring(5, channels=2, instances=2).generate_xml()
    b = allreduce_ring(5, channels=2, instances=2).generate_xml()
    assert a == b


@pytest.mark.parametrize("policy", [ThreadblockPolicy.manual, ThreadblockPolicy.auto])
def test_ir_replication_equals_replicated_lowering(policy):
    """The single-chunk shortcut (replicate the lowered IR) gives the general path's program."""
    from msccl_py.compiler import lower as lowering
    from msccl_py.compiler import replicate
    prog = allreduce_ring(5, channels=2, instances=3, manual=policy is ThreadblockPolicy.manual)
    trace = prog._trace()
    assert replicate.replicable_after_lowering(trace)
    fast = prog.lower()
    general = lowering._lower(trace)
    _ok(fast)
    _ok(general)
    assert fast.nchannels == general.nchannels and fast.nchunksperloop == general.nchunksperloop

    def canon(alg):
        # threadblock numbering may differ (auto creates them in another order): compare
        # each GPU's threadblocks as a set keyed by their connections and steps
        out = []
        for g in alg.gpus:
            ids = {tb.id: (tb.channel, tb.send_peer, tb.recv_peer) for tb in g.threadblocks}
            out.append(sorted(
                (ids[tb.id], tuple((s.op, s.src, s.dst, s.count, s.has_dependents,
                                    tuple(sorted((ids[t], k) for t, k in s.depends)))
                                   for s in tb.steps))
                for tb in g.threadblocks))
        return out
    assert canon(fast) == canon(general)


def test_gc_resume_moves_the_paused_objects_to_the_old_generation():
    import gc
    from msccl_py.compiler.lower import gc_resume
    was = gc.isenabled()
    gc.disable()
    try:
        made = [[] for _ in range(1000)]
        gc_resume()
        assert gc.isenabled()
        old = {id(o) for o in gc.get_objects(generation=2)}
        assert all(id(m) in old for m in made)
        gc.freeze()   # objects a process froze itself stay frozen
        frozen = gc.get_freeze_count()
        gc.disable()
        gc_resume()
        assert gc.isenabled() and gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
        if not was:
            gc.disable()
