"""Step-count summary of a lowered program: sizes that runtime limits and cost care about.

>>> from msccl_py import ir
>>> alg = ir.Algorithm("x", "custom", "Simple", False, 1, 1, 1, gpus=[ir.Gpu(0, 1, 1,
...     threadblocks=[ir.Threadblock(0, steps=[ir.Step("copy", ir.Loc("i", 0), ir.Loc("o", 0))])])])
>>> step_counts(alg).ops
{'copy': 1}
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from msccl_py import ir


@dataclass
class StepCounts:
    """Totals over the whole program and the per-GPU / per-threadblock maxima."""

    steps: int
    ops: dict[str, int]
    sends_per_rank: dict[int, int]
    chunks_sent_per_rank: dict[int, int]
    max_steps_per_threadblock: int
    max_threadblocks_per_gpu: int
    channels_used: int


def step_counts(alg: ir.Algorithm) -> StepCounts:
    """Count steps by op, sends (and chunks sent) per rank, and the largest threadblock.

    >>> step_counts(ir.Algorithm("e", "custom", "Simple", False, 0, 1, 1)).steps
    0
    """
    ops: Counter[str] = Counter()
    sends: dict[int, int] = {}
    chunks: dict[int, int] = {}
    max_steps = 0
    channels = set()
    for gpu in alg.gpus:
        sends[gpu.rank] = 0
        chunks[gpu.rank] = 0
        for tb in gpu.threadblocks:
            channels.add(tb.channel)
            max_steps = max(max_steps, len(tb.steps))
            for step in tb.steps:
                ops[step.op] += 1
                if step.is_send:
                    sends[gpu.rank] += 1
                    chunks[gpu.rank] += step.count
    return StepCounts(
        steps=sum(ops.values()),
        ops=dict(sorted(ops.items())),
        sends_per_rank=sends,
        chunks_sent_per_rank=chunks,
        max_steps_per_threadblock=max_steps,
        max_threadblocks_per_gpu=max((len(g.threadblocks) for g in alg.gpus), default=0),
        channels_used=len(channels),
    )
