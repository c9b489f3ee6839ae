"""A few lines about an MSCCL++ plan, as ``msccl-py info`` prints them.

>>> from msccl_py.mscclpp_ir import Plan
>>> print(summary(Plan("p", "allreduce", "allreduce", "Simple", True, [])))
p: MSCCL++ plan, allreduce on 0 ranks, Simple, in-place, message sizes 0 B .. unbounded
"""

from __future__ import annotations

from collections import Counter

from msccl_py.mscclpp_ir import Plan


def summary(plan: Plan) -> str:
    """A few lines: collective, ranks, protocol, sizes, and per rank threadblocks, channels, operations."""
    # the executor's default maximum is the largest uint64: no bound at all
    hi = "unbounded" if plan.max_message_size >= 2**64 - 1 else f"{plan.max_message_size} B"
    lines = [f"{plan.name}: MSCCL++ plan, {plan.raw_collective} on {plan.nranks} ranks, {plan.protocol}, "
             f"{'in-place' if plan.inplace else 'out-of-place'}, message sizes "
             f"{plan.min_message_size} B .. {hi}"
             + (", double scratch buffer" if plan.double_scratch else "")
             + (", reuses resources" if plan.reuse_resources else "")]
    for g in plan.gpus:
        ops = Counter(op.name for tb in g.threadblocks for top in tb.ops for op in [top] + top.ops)
        lines.append(f"  rank {g.rank}: chunks i/o/s {g.input_chunks}/{g.output_chunks}/{g.scratch_chunks}, "
                     f"{len(g.threadblocks)} threadblocks, channels memory {len(g.memory_channels)} "
                     f"port {len(g.port_channels)} switch {len(g.switch_channels)}, ops "
                     + " ".join(f"{k}={v}" for k, v in sorted(ops.items())))
    return "\n".join(lines)
