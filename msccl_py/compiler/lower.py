"""Run the passes over a :class:`~msccl_py.compiler.trace.Trace` and build the ``ir.Algorithm``.

>>> from msccl_py.compiler.trace import Op, Trace
>>> t = Trace("p", "custom", 2, False, "Simple", 1, False, True, True, [1, 1], [1, 1],
...           [{}, {}], [Op("copy", 0, "i", 0, 1, "o", 0, 1)])
>>> alg = lower(t)
>>> [tb.steps[0].op for _, tb in alg.threadblocks()]
['send', 'recv']
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc

from msccl_py import ir
from msccl_py.compiler import dependencies, fusion, replicate, scratch, schedule, threadblocks
from msccl_py.compiler.dag import Dag
from msccl_py.compiler.trace import Trace


def _assign(dag: Dag, trace: Trace):
    """Order and place instructions, undoing fusions that cannot stand, until all fit."""
    send_conn, recv_conn = schedule.connection_keys(trace.manual)
    while True:
        order, bad = schedule.global_order(dag, send_conn, recv_conn)
        if bad is None:
            try:
                return threadblocks.assign(dag, order, trace.num_ranks, trace.manual,
                                           trace.interleaved)
            except threadblocks.Conflict as c:
                bad = c.ins
        fusion.unfuse(dag, bad)


@contextlib.contextmanager
def gc_paused():
    """Pause the cyclic GC: the passes allocate millions of small acyclic objects,
    which it would rescan over and over (4x slower at 100k steps)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc_resume()


def gc_resume() -> None:
    """Re-enable the cyclic GC after a pause, the objects made during it moved to the oldest
    generation first.

    Re-enabling alone makes the next young collection traverse every object the
    pause left (80 ms after a 100k-step program), though they are the program's
    long-lived state. Freezing then unfreezing moves every tracked object to the
    oldest generation in O(1), where full collections still examine them. A process
    that froze objects itself keeps them frozen: then the GC is only re-enabled.
    """
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()
    gc.enable()


def lower(trace: Trace) -> ir.Algorithm:
    """Compile ``trace`` to the lowered IR."""
    return lower_with_base(trace)[0]


def lower_with_base(trace: Trace) -> tuple[ir.Algorithm, ir.Algorithm | None]:
    """The lowered IR, and the one-instance IR it replicates when instances were
    replicated after lowering (see ``replicate``; a verdict on it holds for all), else None."""
    alg, instances = lower_base(trace)
    if instances == 1:
        return alg, None
    with gc_paused():
        return replicate.replicate_ir(alg, instances), alg


def lower_base(trace: Trace) -> tuple[ir.Algorithm, int]:
    """``(alg, n)``: the lowered IR when ``n`` is 1; else the IR of one instance, which
    ``replicate.replicate_ir(alg, n)`` makes the whole program (instances that can be
    replicated after lowering are, so a caller can use the one before making the other)."""
    with gc_paused():
        if replicate.replicable_after_lowering(trace):
            return _lower(dataclasses.replace(trace, instances=1)), trace.instances
        return _lower(trace), 1


def _lower(trace: Trace) -> ir.Algorithm:
    inst = trace.instances
    ops = replicate.replicate(trace)
    offsets, scratch_totals = scratch.layout(trace.scratch_sizes, inst)
    sizes = [{"i": trace.input_sizes[r] * inst, "o": trace.output_sizes[r] * inst,
              "s": scratch_totals[r]} for r in range(trace.num_ranks)]
    dag = Dag(ops, sizes, offsets)
    if trace.fusion:
        fusion.fuse(dag, trace.manual)
    if not trace.manual:  # manual programs name their channels: no need to load the pass
        from msccl_py.compiler import channels
        channels.assign(dag)
    tbs, nchannels, channel_number = _assign(dag, trace)
    Step = ir.Step
    new = object.__new__
    instrs = dag.instrs
    gpus = []
    for r in range(trace.num_ranks):
        irtbs = []
        for tb in tbs[r]:
            steps = []
            append = steps.append
            for ins in tb.steps:
                op = ins.op
                # send-type steps name the receiver's slot, recv-type the sender's
                if op == "send":
                    src, dst = ins.src, instrs[ins.match].dst
                elif op == "recv_reduce_send":
                    src, dst = ins.src, instrs[instrs[ins.absorbed].match].dst
                elif op == "recv":
                    src, dst = instrs[ins.match].src, ins.dst
                elif op == "recv_copy_send":
                    src = dst = ins.dst
                else:
                    src, dst = ins.src, ins.dst
                st = new(Step)  # every field of replicate.STEP_FIELDS, in order
                st.op = op
                st.src = src
                st.dst = dst
                st.count = ins.count
                st.depends = []
                st.has_dependents = False
                append(st)
            tb.ir = steps
            irtbs.append(ir.Threadblock(tb.id, tb.send_peer, tb.recv_peer,
                                        channel_number[tb.channel], steps))
        gpus.append(ir.Gpu(r, trace.input_sizes[r] * inst, trace.output_sizes[r] * inst,
                           scratch_totals[r], irtbs))
    dependencies.infer(dag, tbs)
    for rank_tbs in tbs:  # Instr.tb <-> Tb.steps is a cycle: break it so refcounting frees both
        for tb in rank_tbs:
            tb.steps = tb.ir = None
    nchunks = max([g.input_chunks for g in gpus] + [g.output_chunks for g in gpus] + [1])
    return ir.Algorithm(name=trace.name, collective=trace.collective, protocol=trace.protocol,
                        inplace=trace.inplace, outofplace=not trace.inplace,
                        ngpus=trace.num_ranks, nchunksperloop=nchunks, nchannels=nchannels,
                        gpus=gpus)
