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
from itertools import compress
from operator import eq

from msccl_py.compiler.dag import Dag, Instr


def connection_keys(manual: bool):
    """``(send key, receive key)`` functions naming the connection an instruction uses.

    Manual programs name threadblocks; automatic ones get one threadblock per
    (channel, peer) connection (``threadblocks``).
    """
    if manual:
        return (lambda ins: (ins.rank, ins.sendtb, ins.inst),
                lambda ins: (ins.rank, ins.recvtb, ins.inst))
    return (lambda ins: (ins.rank, ins.ch if ins.ch >= 0 else 0, ins.inst, ins.sp),
            lambda ins: (ins.rank, ins.ch if ins.ch >= 0 else 0, ins.inst, -1 - ins.rp))


def global_order(dag: Dag, send_conn, recv_conn) -> tuple[list[Instr], Instr | None]:
    """``(order, None)``, or ``(partial, fused instruction to unfuse)`` on a cycle.

    ``send_conn(ins)`` / ``recv_conn(ins)`` name the connection an instruction
    sends / receives on (:func:`connection_keys`).

    Every hazard edge already runs forward in priority (a predecessor is an
    earlier operation in the same or an earlier round), and so does every
    receive chain; only a send chain through fused instructions can run
    backwards. When none does, the priority order itself is what
    :func:`topological_order` would produce, and one sort finds it.
    """
    prio, live, alive = _prepare(dag)
    keys = list(compress(prio, alive))
    keys.sort()
    order = list(map(dag.instrs.__getitem__, map(dag.scale.__rmod__, keys)))  # k % scale
    # in priority order, each send connection's departures must come in order too
    last: dict = {}
    get = last.get
    for at, ins in zip(keys, order):  # ``at``: the instruction's own priority
        if ins.sp >= 0:
            a = ins.absorbed
            if a >= 0:  # a fused send leaves at its absorbed send's position
                at = prio[a] - a + ins.id
            key = send_conn(ins)
            if at < get(key, -1):
                return _hold_back(dag, order, live, prio, send_conn, recv_conn)
            last[key] = at
    return order, None


def _hold_back(dag: Dag, stream: list[Instr], live: list[Instr], prio: list[int], send_conn,
               recv_conn) -> tuple[list[Instr], Instr | None]:
    """:func:`topological_order`'s result, from the priority order ``stream``.

    Walks the stream and holds back only instructions that wait on one not yet
    emitted (a send chain running backwards); each is queued on one missing
    predecessor at a time and goes to a heap once all are out. The next
    instruction is the lower of the heap's top and the stream's first ready
    one: exactly the lowest ready instruction the heap sort would take, at
    the price of a heap for the few held back rather than for all.
    """
    instrs = dag.instrs
    carrier = dag.carrier
    n = len(instrs)
    scale = dag.scale
    sends = _send_chains(live, prio, send_conn)
    before_send = [-1] * n  # predecessor on the instruction's send / receive connection
    before_recv = [-1] * n
    for chain in sends.values():
        prev = -1
        for at in chain:
            b = at % scale
            before_send[b] = prev
            prev = b
    last: dict = {}
    for ins in stream:  # receive chains are in priority order
        if ins.rp >= 0:
            key = recv_conn(ins)
            before_recv[ins.id] = last.get(key, -1)
            last[key] = ins.id
    done = bytearray(n)

    def missing(ins: Instr) -> int:
        """A predecessor of ``ins`` not emitted yet, or -1."""
        me = ins.id
        b = before_send[me]
        if b >= 0 and not done[b]:
            return b
        b = before_recv[me]
        if b >= 0 and not done[b]:
            return b
        for q in ins.preds:
            p = carrier[q]
            if p != me and not done[p]:
                return p
        return -1

    waiting: dict[int, list[Instr]] = {}
    heap: list[int] = []
    push, pop = heapq.heappush, heapq.heappop
    order: list[Instr] = []
    append = order.append
    cand = None
    i, m = 0, len(stream)
    while True:
        while cand is None and i < m:
            x = stream[i]
            i += 1
            b = missing(x)
            if b < 0:
                cand = x
            elif b in waiting:
                waiting[b].append(x)
            else:
                waiting[b] = [x]
        if heap and (cand is None or heap[0] < prio[cand.id]):
            x = instrs[pop(heap) % scale]
        elif cand is not None:
            x, cand = cand, None
        else:
            break
        done[x.id] = 1
        append(x)
        held = waiting.pop(x.id, None)
        if held:
            for w in held:
                b = missing(w)
                if b < 0:
                    push(heap, prio[w.id])
                elif b in waiting:
                    waiting[b].append(w)
                else:
                    waiting[b] = [w]
    if len(order) == len(live):
        return order, None
    # a cycle: the full sort finds the fused instruction to undo (or names the cycle)
    return _kahn(dag, live, prio, sends, recv_conn)


def topological_order(dag: Dag, send_conn, recv_conn) -> tuple[list[Instr], Instr | None]:
    """:func:`global_order` by a heap-driven topological sort of every edge (no shortcut)."""
    prio, live, _ = _prepare(dag)
    return _kahn(dag, live, prio, _send_chains(live, prio, send_conn), recv_conn)


def _prepare(dag: Dag) -> tuple[list[int], list[Instr], list[bool]]:
    """Each instruction's priority, the live instructions, and which ids are live.

    The priority (``Dag.prio``) is (position of the (received) transfer, id) packed in
    one int, where position = round, then program order; int comparisons keep sorts and
    heaps cheap. ``prio % dag.scale`` is the id.
    """
    instrs = dag.instrs
    alive = list(map(eq, dag.carrier, range(len(instrs))))  # carried by itself: not absorbed
    return dag.prio, list(compress(instrs, alive)), alive


def _send_chains(live: list[Instr], prio: list[int], send_conn) -> dict:
    """Per send connection, the sorted packed ``(position, id)`` of its sends."""
    sends: dict = {}
    for ins in live:
        if ins.sp >= 0:
            me = ins.id
            a = ins.absorbed
            # a fused send leaves at its absorbed send's position
            at = prio[a] - a + me if a >= 0 else prio[me]
            key = send_conn(ins)
            chain = sends.get(key)
            if chain is None:
                sends[key] = [at]
            else:
                chain.append(at)
    for chain in sends.values():
        chain.sort()
    return sends


def _kahn(dag: Dag, live: list[Instr], prio: list[int], sends: dict,
          recv_conn) -> tuple[list[Instr], Instr | None]:
    """Topological sort of hazards plus connection chains, lowest priority first."""
    instrs = dag.instrs
    carrier = dag.carrier
    n = len(instrs)
    scale = dag.scale
    succ: list = [None] * n
    indeg = [0] * n
    recvs: dict = {}
    for ins in live:
        me = ins.id
        preds = ins.preds
        if preds:
            d = 0
            for q in preds:
                p = carrier[q]
                if p != me:
                    lst = succ[p]
                    if lst is None:
                        succ[p] = [me]
                    else:
                        lst.append(me)
                    d += 1
            indeg[me] = d
        if ins.rp >= 0:
            key = recv_conn(ins)
            chain = recvs.get(key)
            if chain is None:
                recvs[key] = [prio[me]]
            else:
                chain.append(prio[me])
    for chain in recvs.values():
        chain.sort()
    for chains in (sends, recvs):
        for chain in chains.values():
            prev = chain[0] % scale
            for at in chain[1:]:
                b = at % scale
                lst = succ[prev]
                if lst is None:
                    succ[prev] = [b]
                else:
                    lst.append(b)
                indeg[b] += 1
                prev = b
    heap = [prio[ins.id] for ins in live if indeg[ins.id] == 0]
    heapq.heapify(heap)
    order: list[Instr] = []
    append = order.append
    push, pop = heapq.heappush, heapq.heappop
    while heap:
        i = pop(heap) % scale
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
                       f"({ops[dag.instrs[i].seq].where})" for i in cyc)
