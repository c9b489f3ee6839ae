"""Instances: replicate every operation ``instances`` times over disjoint sub-chunks.

Each base chunk becomes ``instances`` chunks. With interleaved replication
an operation on chunks ``[a, a+s)`` becomes, for instance ``i``, the
operation on ``[a*I + i*s, a*I + (i+1)*s)``; every instance together moves
the scaled range ``[a*I, (a+s)*I)`` by the same translation, so the data
mapping is consistent whatever sizes the program mixes. Batched replication
puts instance ``i`` in its own copy of the buffer: ``a + i*B`` for a buffer
of ``B`` base chunks. Channels and threadblocks are replicated later, from
``Op.inst``.

When every operation moves single chunks, instances never touch each
other's chunks, and the lowered program of ``I`` instances is the one of a
single instance with every chunk ``k`` renumbered ``k*I + i``, every channel
``c`` as ``c*I + i`` and every threadblock ``t`` as ``t*I + i``:
:func:`replicate_ir` builds it directly (compile time stays linear in the
base program instead of the replicated one).
"""

from __future__ import annotations

import dataclasses

from msccl_py import ir
from msccl_py.compiler.trace import Op, Trace


def replicate(trace: Trace) -> list[Op]:
    """The trace's operations for every instance, in program order (instances adjacent)."""
    n = trace.instances
    if n == 1:
        return trace.ops
    out: list[Op] = []
    append = out.append
    if trace.interleaved:
        for op in trace.ops:
            s = op.size
            a, b = op.src_idx * n, op.dst_idx * n
            for i in range(n):
                append(Op(op.kind, op.src_rank, op.src_buf, a + i * s, op.dst_rank, op.dst_buf,
                          b + i * s, s, op.sendtb, op.recvtb, op.ch, op.file, op.line, i))
        return out
    sizes = [_base_sizes(trace, r) for r in range(trace.num_ranks)]
    for op in trace.ops:
        bs = sizes[op.src_rank][op.src_buf]
        bd = sizes[op.dst_rank][op.dst_buf]
        for i in range(n):
            append(Op(op.kind, op.src_rank, op.src_buf, op.src_idx + i * bs, op.dst_rank,
                      op.dst_buf, op.dst_idx + i * bd, op.size, op.sendtb, op.recvtb, op.ch,
                      op.file, op.line, i))
    return out


def _base_sizes(trace: Trace, rank: int) -> dict:
    sizes = {"i": trace.input_sizes[rank], "o": trace.output_sizes[rank]}
    for name, size in trace.scratch_sizes[rank].items():
        sizes[("s", name)] = size
    return sizes


def replicable_after_lowering(trace: Trace) -> bool:
    """True when :func:`replicate_ir` of the one-instance lowering equals lowering all instances."""
    return (trace.instances > 1 and trace.interleaved
            and all(op.size == 1 for op in trace.ops))


#: every field of ``ir.Step``, in order. :func:`replicate_ir` and ``lower`` make a program's
#: hundreds of thousands of steps as ``object.__new__(Step)`` with these fields set inline:
#: the dataclass ``__init__`` call costs about a third more. Importing the compiler fails
#: if ``ir.Step`` gains, loses or renames a field (or a ``__post_init__``), so no field
#: can stay unset.
STEP_FIELDS = ("op", "src", "dst", "count", "depends", "has_dependents")
if ir.Step.__slots__ != STEP_FIELDS or hasattr(ir.Step, "__post_init__"):
    raise ImportError("ir.Step's fields changed: update msccl_py.compiler.replicate.STEP_FIELDS "
                      "and the steps built field by field (replicate_ir, lower._lower)")


def replicate_ir(alg: ir.Algorithm, instances: int) -> ir.Algorithm:
    """Interleaved replication of a lowered single-chunk program (see the module docstring)."""
    n = instances
    Step, Loc = ir.Step, ir.Loc
    new = object.__new__
    # each base location's n copies, made once: programs name few locations many times.
    # Found by the object first (the lowering interns locations; C-fast), then by value
    copies: dict = {}
    by_id: dict = {id(None): _NONE * n}

    def locs(old):
        key = (old.buffer, old.offset)
        found = copies.get(key)
        if found is None:
            base = old.offset * n
            found = copies[key] = tuple(Loc(old.buffer, base + i) for i in range(n))
        by_id[id(old)] = found
        return found

    get = by_id.get
    gpus = []
    for gpu in alg.gpus:
        tbs = []
        for tb in gpu.threadblocks:
            base = []
            row = base.append
            for st in tb.steps:
                src, dst = st.src, st.dst
                row((st.op, get(id(src)) or locs(src), get(id(dst)) or locs(dst), st.count,
                     st.depends, st.has_dependents))
            for i in range(n):
                steps = []
                add = steps.append
                for op, src, dst, count, deps, dependents in base:
                    st = new(Step)  # every field of STEP_FIELDS, in order
                    st.op = op
                    st.src = src[i]
                    st.dst = dst[i]
                    st.count = count
                    st.depends = [(t * n + i, s) for t, s in deps] if deps else []
                    st.has_dependents = dependents
                    add(st)
                tbs.append(ir.Threadblock(tb.id * n + i, tb.send_peer, tb.recv_peer,
                                          tb.channel * n + i, steps))
        gpus.append(ir.Gpu(gpu.rank, gpu.input_chunks * n, gpu.output_chunks * n,
                           gpu.scratch_chunks * n, tbs))
    return dataclasses.replace(alg, gpus=gpus, nchunksperloop=alg.nchunksperloop * n,
                               nchannels=alg.nchannels * n)


_NONE = (None,)
