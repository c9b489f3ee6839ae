"""Scheduling priority: one global order of all live instructions.

The order must respect (1) every hazard edge and (2) every connection: the
sends of a connection leave in the order of their transfers' positions
(round, then program order; see ``dag``), and its receives take them in that
same order. A fused instruction both
receives one transfer and sends a later one, so (2) is a real constraint:
the scheduler topologically sorts hazards plus per-connection chains,
preferring early rounds, then program order. Threadblocks then take their steps in this one
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
    n = len(instrs)
    span = len(dag.ops) + 1
    # position of an instruction's (received) transfer: round first, then program order
    pos = [ins.level * span + ins.seq for ins in instrs]
    live = [ins for ins in instrs if ins.alive]
    succ: list = [None] * n
    indeg = [0] * n
    sends: dict = {}
    recvs: dict = {}
    for ins in live:
        me = ins.id
        for q in ins.preds:
            p = q if instrs[q].alive else resolve(instrs, q)
            if p != me:
                lst = succ[p]
                if lst is None:
                    succ[p] = [me]
                else:
                    lst.append(me)
                indeg[me] += 1
        if ins.sp >= 0:
            key = send_conn(ins)
            at = pos[ins.absorbed] if ins.absorbed >= 0 else pos[me]
            chain = sends.get(key)
            if chain is None:
                sends[key] = [(at, me)]
            else:
                chain.append((at, me))
        if ins.rp >= 0:
            key = recv_conn(ins)
            chain = recvs.get(key)
            if chain is None:
                recvs[key] = [(pos[me], me)]
            else:
                chain.append((pos[me], me))
    for chains in (sends, recvs):
        for chain in chains.values():
            chain.sort()
            prev = chain[0][1]
            for _, b in chain[1:]:
                lst = succ[prev]
                if lst is None:
                    succ[prev] = [b]
                else:
                    lst.append(b)
                indeg[b] += 1
                prev = b
    # priority = (position, id) packed in one int: int comparisons keep the heap cheap
    prio = [pos[i] * n + i for i in range(n)]
    heap = [prio[ins.id] for ins in live if indeg[ins.id] == 0]
    heapq.heapify(heap)
    order: list[Instr] = []
    append = order.append
    push, pop = heapq.heappush, heapq.heappop
    while heap:
        i = pop(heap) % n
        append(instrs[i])
        lst = succ[i]
        if lst:
            for j in lst:
                d = indeg[j] - 1
                indeg[j] = d
                if d == 0:
                    push(heap, prio[j])
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
        node = next((j for j in (succ[node] or ()) if j in stuck), start)
    cyc = path[seen[node]:] + [node]
    ops = dag.ops
    return " -> ".join(f"{dag.instrs[i].op} on rank {dag.instrs[i].rank} "
                       f"({ops[dag.instrs[i].opi].where})" for i in cyc)
