"""Dependency inference: cross-threadblock waits, pruned.

A step waits for each predecessor in another threadblock of its GPU. A
threadblock publishes a monotone flag, so of several waits on one
threadblock only the latest step matters, and a wait that an earlier step of
the same threadblock already covered is dropped.
"""

from __future__ import annotations

from msccl_py.compiler.dag import Dag, Instr


def infer(dag: Dag, tbs) -> tuple[dict, set]:
    """``({instr id: [(tb id, step), ...]}, ids of instructions some step waits for)``."""
    instrs = dag.instrs
    carrier = dag.carrier
    deps: dict[int, list[tuple[int, int]]] = {}
    targets: set[int] = set()
    for rank_tbs in tbs:
        for tb in rank_tbs:
            covered: dict[int, int] = {}
            for ins in tb.steps:
                if not ins.preds:
                    continue
                want: dict[int, Instr] = {}
                for q in ins.preds:
                    p = instrs[carrier[q]]
                    if p.tb is tb:
                        continue
                    best = want.get(p.tb.id)
                    if best is None or best.step < p.step:
                        want[p.tb.id] = p
                out = []
                for tb_id, p in want.items():
                    if covered.get(tb_id, -1) >= p.step:
                        continue
                    covered[tb_id] = p.step
                    out.append((tb_id, p.step))
                    targets.add(p.id)
                if out:
                    out.sort()
                    deps[ins.id] = out
    return deps, targets
