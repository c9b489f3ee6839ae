"""Scheduling priority: one global order of all live instructions.

The order must respect (1) every hazard edge and (2) every connection: the
sends of a connection leave in the order of their transfers in the program,
and its receives take them in that same order. A fused instruction both
receives one transfer and sends a later one, so (2) is a real constraint:
the scheduler topologically sorts hazards plus per-connection chains,
preferring program order. Threadblocks then take their steps in this one
order, so waits between threadblocks cannot form a cycle.

When the constraints are cyclic (a fusion whose early send would overtake
another send), :func:`global_order` reports the fused instruction to undo.
"""

from __future__ import annotations

import heapq

from msccl_py.compiler.dag import Dag, Instr
from msccl_py.compiler.fusion import resolve


def global_order(dag: Dag, send_conn, recv_conn) -> tuple[list[Instr], Instr | None]:
    """``(order, None)``, or ``(partial, fused instruction to unfuse)`` on a cycle.

    ``send_conn(ins)`` / ``recv_conn(ins)`` name the connection an instruction
    sends / receives on.
    """
    instrs = dag.instrs
    live = [ins for ins in instrs if ins.alive]
    succ: dict[int, list[int]] = {}
    indeg: dict[int, int] = {}
    for ins in live:
        indeg[ins.id] = 0
    for ins in live:
        me = ins.id
        for q in ins.preds:
            p = resolve(instrs, q)
            if p != me:
                succ.setdefault(p, []).append(me)
                indeg[me] += 1
    sends: dict = {}
    recvs: dict = {}
    for ins in live:
        if ins.sp >= 0:
            sends.setdefault(send_conn(ins), []).append((ins.send_seq, ins.id))
        if ins.rp >= 0:
            recvs.setdefault(recv_conn(ins), []).append((ins.seq, ins.id))
    for chains in (sends, recvs):
        for chain in chains.values():
            chain.sort()
            for (_, a), (_, b) in zip(chain, chain[1:]):
                succ.setdefault(a, []).append(b)
                indeg[b] += 1
    heap = [(ins.seq, ins.id) for ins in live if indeg[ins.id] == 0]
    heapq.heapify(heap)
    order: list[Instr] = []
    while heap:
        _, i = heapq.heappop(heap)
        order.append(instrs[i])
        for j in succ.get(i, ()):
            indeg[j] -= 1
            if indeg[j] == 0:
                heapq.heappush(heap, (instrs[j].seq, j))
    if len(order) == len(live):
        return order, None
    stuck = [ins for ins in live if indeg[ins.id] > 0 and ins.absorbed >= 0]
    if not stuck:
        from msccl_py.errors import CycleError
        raise CycleError("instruction dependencies form a cycle: "
                         + _describe_cycle(dag, live, indeg, succ))
    return order, min(stuck, key=lambda ins: ins.seq)


def _describe_cycle(dag: Dag, live, indeg, succ) -> str:
    """Walk from a stuck instruction along stuck successors until a node repeats."""
    stuck = {ins.id for ins in live if indeg[ins.id] > 0}
    start = min(stuck)
    seen: dict[int, int] = {}
    path = []
    node = start
    while node not in seen:
        seen[node] = len(path)
        path.append(node)
        node = next(j for j in succ.get(node, ()) if j in stuck) if any(
            j in stuck for j in succ.get(node, ())) else start
    cyc = path[seen[node]:] + [node]
    ops = dag.ops
    return " -> ".join(f"{dag.instrs[i].op} on rank {dag.instrs[i].rank} "
                       f"({ops[dag.instrs[i].opi].where})" for i in cyc)
