"""Which consecutive reductions the MSCCL runtimes fuse into one multi-source reduction.

Execution semantics every consumer of a plan shares: the verifier's static
rules, each XML dialect's limit on sources per fused reduction, and the
writer's hoisting of reduction dependencies.
"""

from __future__ import annotations

from msccl_py import ir

#: sources one fused multi-source reduction may have (``MSCCL_MAX_REDUCE_FUSION``).
MAX_REDUCE_SOURCES = 16


def fused_reductions(tb: ir.Threadblock) -> list[tuple[int, int]]:
    """``(first IR index, number of sources)`` of each reduction the runtimes fuse in ``tb``.

    A ``reduce`` continues the previous one when it has the same destination
    and source buffer, no dependency of its own and the previous one has no
    dependents. The runtimes' parser ends a chain when the threadblock's
    running count of reductions reaches 16; the count is per threadblock, not
    per chain, so only the threadblock's 16th reduction cuts one, and a later
    chain can grow past 16 (the kernel then skips that reduction). This
    reproduces that exactly so that a dialect's limit check can refuse such
    programs.

    >>> red = lambda o: ir.Step("reduce", src=ir.Loc("s", o), dst=ir.Loc("i", 0))
    >>> fused_reductions(ir.Threadblock(0, steps=[red(0), red(1), red(2)]))
    [(0, 3)]
    """
    chains: list[tuple[int, int]] = []
    total = 0
    open_dst: ir.Loc | None = None
    open_src_buf = None
    for k, step in enumerate(tb.steps):
        if step.op != "reduce":
            open_dst = None
            continue
        src_buf = step.src.buffer if step.src is not None else ir.INPUT
        if (open_dst is not None and step.dst == open_dst and src_buf == open_src_buf
                and not step.depends):
            first, n = chains[-1]
            chains[-1] = (first, n + 1)
        else:
            chains.append((k, 1))
        total += 1
        if step.has_dependents or total == MAX_REDUCE_SOURCES:
            open_dst = None
        else:
            open_dst, open_src_buf = step.dst, src_buf
    return chains
