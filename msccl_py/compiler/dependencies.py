"""Dependency inference: cross-threadblock waits, pruned.

A step waits for each predecessor in another threadblock of its GPU. A
threadblock publishes a monotone flag, so of several waits on one
threadblock only the latest step matters, and a wait that an earlier step of
the same threadblock already covered is dropped.
"""

from __future__ import annotations

from msccl_py.compiler.dag import Dag, Instr


def infer(dag: Dag, tbs) -> None:
    """Set ``depends`` and ``has_dependents`` on the IR steps of every threadblock.

    ``tb.ir[k]`` is the IR step of ``tb.steps[k]``; it arrives with no
    dependencies.
    """
    instrs = dag.instrs
    carrier = dag.carrier
    for rank_tbs in tbs:
        for tb in rank_tbs:
            covered: dict[int, int] | None = None
            irsteps = tb.ir
            for k, ins in enumerate(tb.steps):
                preds = ins.preds
                if not preds:
                    continue
                want: dict[int, Instr] | None = None
                for q in preds:
                    p = instrs[carrier[q]]
                    ptb = p.tb
                    if ptb is tb:
                        continue
                    if want is None:
                        want = {ptb.id: p}
                    else:
                        best = want.get(ptb.id)
                        if best is None or best.step < p.step:
                            want[ptb.id] = p
                if want is None:
                    continue
                if covered is None:
                    covered = {}
                out = []
                for tb_id, p in want.items():
                    if covered.get(tb_id, -1) >= p.step:
                        continue
                    covered[tb_id] = p.step
                    out.append((tb_id, p.step))
                    p.tb.ir[p.step].has_dependents = True
                if out:
                    if len(out) > 1:
                        out.sort()
                    irsteps[k].depends = out
