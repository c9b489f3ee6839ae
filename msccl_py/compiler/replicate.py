"""Instances: replicate every operation ``instances`` times over disjoint sub-chunks.

Each base chunk becomes ``instances`` chunks. With interleaved replication
an operation on chunks ``[a, a+s)`` becomes, for instance ``i``, the
operation on ``[a*I + i*s, a*I + (i+1)*s)``; every instance together moves
the scaled range ``[a*I, (a+s)*I)`` by the same translation, so the data
mapping is consistent whatever sizes the program mixes. Batched replication
puts instance ``i`` in its own copy of the buffer: ``a + i*B`` for a buffer
of ``B`` base chunks. Channels and threadblocks are replicated later, from
``Op.inst``.
"""

from __future__ import annotations

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
