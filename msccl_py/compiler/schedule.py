"""Scheduling priority: one global order of all live instructions.

Sorting by ``(chain, program order)`` is a topological order of the DAG with
every fused chain contracted to one node (see ``fusion``). Every threadblock
runs its steps in this one order, so sends and receives pair up in the same
order on every connection and no two threadblocks wait on each other in a
cycle.
"""

from __future__ import annotations

from msccl_py.compiler.dag import Dag, Instr


def global_order(dag: Dag) -> list[Instr]:
    live = [ins for ins in dag.instrs if ins.alive]
    live.sort(key=lambda ins: (ins.group, ins.seq, ins.id))
    return live
