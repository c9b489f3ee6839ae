"""Event-driven execution model: threadblocks, dependency flags and bounded FIFOs.

Each threadblock runs its step list once per pipeline iteration. Before a
step it waits until every threadblock it depends on has published at least
(same iteration, that step); after a step with ``has_dependents`` it
publishes (iteration, step). A step of count ``c`` makes
``ceil(c / max_allowed_count)`` transfers; each transfer needs one entry in
the receive FIFO (recv-type steps) and one free place in the send FIFO
(send-type steps), which holds ``capacity`` transfers. Local ``copy``/
``reduce`` steps touch no FIFO.

Scheduling is a worklist of runnable threadblocks: one runs until it blocks,
and registers on the FIFO or flag it waits for; pushes, pops and flag
publications wake exactly the waiters concerned. Work is linear in steps x
iterations. When the worklist empties with threadblocks unfinished, the
wait-for graph (each blocked threadblock waits on one other) yields the
shortest wait cycle. Where iteration 0 provably decides the later iterations
(:func:`_repeats`), it runs alone first: if it completes with the FIFOs empty, the
later ones repeat it from the same state and are not run; otherwise the run goes on.

``data`` (the verifier's symbolic state, the reference runtime's arrays, or anything with a
``transfer(step_row, lo, hi, payload, iteration)`` method returning what the
step sends) receives every transfer of iteration 0 (of every iteration when
it has ``every_iteration = True``, as the reference runtime does) in a legal
execution order: chunks ``[lo, hi)`` of the step, ``payload`` what the
receive took from its FIFO; its optional ``complete(step_row)`` is called when a step
finishes.

>>> from msccl_py import ir
>>> from msccl_py.plan.tables import build_plan
>>> a = ir.Threadblock(0, send_peer=1, recv_peer=1,
...     steps=[ir.Step("recv", dst=ir.Loc("o", 0)), ir.Step("send", ir.Loc("i", 0))])
>>> b = ir.Threadblock(0, send_peer=0, recv_peer=0,
...     steps=[ir.Step("recv", dst=ir.Loc("o", 0)), ir.Step("send", ir.Loc("i", 0))])
>>> alg = ir.Algorithm("x", "custom", "Simple", False, 2, 1, 1,
...                    [ir.Gpu(0, 1, 1, 0, [a]), ir.Gpu(1, 1, 1, 0, [b])])
>>> res = simulate(build_plan(alg), iterations=1, max_allowed_count=1, capacity=2)
>>> res.completed, len(res.cycle)
(False, 2)
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from msccl_py.plan.tables import (
    B_NSTEPS,
    B_RANK,
    B_RECV_CONN,
    B_SEND_CONN,
    B_STEP_BEGIN,
    B_TB,
    C_CHAN,
    C_RECV_BLOCK,
    C_SEND_BLOCK,
    D_BLOCK,
    D_INDEX,
    D_STEP,
    IS_RECV,
    IS_SEND,
    OP_NAMES,
    S_COUNT,
    S_DEP_BEGIN,
    S_HAS_DEP,
    S_NDEPS,
    S_BLOCK,
    S_OP,
    Plan,
)
from msccl_py.plan.findings import Waiter

RECV, SEND, DEP = "recv", "send", "dep"


@dataclass
class SimResult:
    """Outcome of one run: ``completed``, or the blocked threadblocks and a wait cycle."""

    completed: bool
    blocked: int = 0
    cycle: list[Waiter] = field(default_factory=list)
    transfers: int = 0


def _prepare(plan: Plan, mac: int) -> list:
    """Per block: list of step tuples (row, send?, recv?, transfers, deps, hasdep, count).

    Made once per plan and ``mac`` (kept in the plan's list cache): the regimes
    and data modes of one verification share it.
    """
    key = ("events", mac)
    prog = plan._lists.get(key)
    if prog is not None:
        return prog
    st = plan.steps
    op, count = st[:, S_OP], st[:, S_COUNT]
    snd, rcv = IS_SEND[op], IS_RECV[op]
    # a FIFO step of count c makes ceil(c / mac) transfers, a local one 1 (none when c = 0)
    ntr = np.where(snd | rcv, -(-count // mac), 1) * (count > 0)
    dls: list = [()] * len(st)
    if len(plan.deps):
        deps = plan.as_lists("deps")
        for g in np.flatnonzero(st[:, S_NDEPS] > 0).tolist():
            first = int(st[g, S_DEP_BEGIN])
            dls[g] = tuple((d[D_BLOCK], d[D_INDEX])
                           for d in deps[first:first + int(st[g, S_NDEPS])])
    flat = list(zip(range(len(st)), snd.tolist(), rcv.tolist(), ntr.tolist(), dls,
                    (st[:, S_HAS_DEP] != 0).tolist(), count.tolist()))
    prog = plan._lists[key] = [flat[b[B_STEP_BEGIN]:b[B_STEP_BEGIN] + b[B_NSTEPS]]
                               for b in plan.as_lists("blocks")]
    return prog


#: run iteration 0 alone first where :func:`_repeats` allows (tests turn it off to compare)
_SHORTCUT = True

#: without data, a send-only step whose receiver already waits at a receive-only step on the
#: same empty FIFO moves as many transfers as both have left at once. That is the schedule
#: "push one, pop one" repeated, so (a Kahn network: every schedule ends in the same state,
#: see :func:`_repeats`) the outcome is the same; a step of c chunks in the large regime
#: then costs one pass, not c (an allgather's are n^2 in all). Tests turn it off to compare.
_STREAM = True


def _repeats(plan: Plan, mac: int) -> bool:
    """Whether iteration 0, run alone, decides the later iterations.

    Why a run that stops after iteration 0 is then exact:

    1. Each FIFO has one sending and one receiving threadblock (the plan refuses a
       second end; checked again here) and flags only grow, so the model is a Kahn
       process network: a transfer, dependency or publication that may run stays
       runnable until its own threadblock takes it, and steps of different
       threadblocks commute. Every schedule ends in the same state: the same
       finished and blocked threadblocks at the same places, the same transfer count,
       hence the same wait cycle.
    2. "All of iteration 0, then the rest" is one of those schedules. If iteration 0
       completes with every FIFO empty, the state is the initial one shifted by an
       iteration: flags compare as ``i * width + p`` and every flag left from
       iteration 0 is below ``width``, so for iteration 1's goals
       (``width + idx``) it reads as the initial -1 does for iteration 0's, provided
       ``0 <= idx < width`` (a dependency that names an existing step; a negative or
       too large index reaches into another iteration). Iteration 1 then repeats
       iteration 0, and so on: the run completes, with ``iterations`` times
       iteration 0's transfers.
    3. Data sees iteration 0 alone (the shortcut is off for ``every_iteration``).
       With as many transfers per iteration each way on each connection and every
       dependency naming a step that publishes, whether an iteration-0 step may run
       depends on iteration-0 steps alone (its FIFO entries, its FIFO room and the
       flag it waits for all come from iteration 0), and no later step wakes a
       threadblock still in iteration 0. So the worklist takes the iteration-0 steps
       in the same order with or without the later iterations, and data sees the
       same calls in the same order. That holds when iteration 0 does not complete
       too: the run then goes on from where iteration 0 stopped, and by 1 ends where
       the full run ends, with no iteration-0 step left to run.

    Cached per plan and ``mac``.
    """
    key = ("repeats", mac)
    ok = plan._lists.get(key)
    if ok is not None:
        return ok
    st, blk = plan.steps, plan.blocks
    nb = len(blk)
    ok = True
    for col in (B_SEND_CONN, B_RECV_CONN):
        used = blk[:, col][blk[:, col] >= 0]
        ok = ok and (len(used) == 0 or int(np.bincount(used).max()) == 1)
    if ok and len(plan.deps):
        d = plan.deps
        named = d[d[:, D_BLOCK] >= 0]
        ok = bool(np.all(named[:, D_STEP] >= 0)) and bool(
            np.all(st[named[:, D_STEP], S_HAS_DEP] != 0))
    if ok and nb:
        op, count = st[:, S_OP], st[:, S_COUNT]
        ntr = -(-count // mac) * (count > 0)
        per = [np.bincount(st[:, S_BLOCK], weights=ntr * side[op], minlength=nb)
               for side in (IS_SEND, IS_RECV)]
        conn_sent = np.zeros(len(plan.conns) + 1)
        conn_recv = np.zeros(len(plan.conns) + 1)
        # blocks without a connection add to the spare last slot, which is not compared
        np.add.at(conn_sent, np.where(blk[:, B_SEND_CONN] >= 0, blk[:, B_SEND_CONN], -1),
                  per[0])
        np.add.at(conn_recv, np.where(blk[:, B_RECV_CONN] >= 0, blk[:, B_RECV_CONN], -1),
                  per[1])
        ok = bool(np.array_equal(conn_sent[:-1], conn_recv[:-1]))
    plan._lists[key] = ok
    return ok


def simulate(plan: Plan, iterations: int, max_allowed_count: int, capacity: int, data=None,
             reverse: bool = False) -> SimResult:
    """Run the model; ``reverse`` schedules threadblocks in the opposite order."""
    mac = max(1, int(max_allowed_count))
    prog = _prepare(plan, mac)
    nb = len(prog)
    blocks = plan.as_lists("blocks")
    conns = plan.as_lists("conns")
    width = max((len(p) for p in prog), default=0) + 1
    pc = [0] * nb
    it = [0] * nb
    tr = [0] * nb
    dcur = [0] * nb
    flag = [-1] * nb
    done = [False] * nb
    waiting: list = [None] * nb
    fifo = [deque() for _ in conns]
    recv_wait = [-1] * len(conns)
    send_wait = [-1] * len(conns)
    flag_wait: list[list] = [[] for _ in range(nb)]
    # per block, fixed for the run: steps, their number, send and receive connection and
    # FIFO (None without one), and what it waits on when its FIFOs stop it
    info = []
    for steps_b, blk in zip(prog, blocks):
        sc, rc = blk[B_SEND_CONN], blk[B_RECV_CONN]
        info.append((steps_b, len(steps_b), sc, rc, fifo[sc] if sc >= 0 else None,
                     fifo[rc] if rc >= 0 else None, (RECV, rc, None), (SEND, sc, None)))
    queued = [True] * nb
    work = deque(range(nb))
    # reverse: last threadblock first and the most recently woken next (LIFO)
    pop = work.pop if reverse else work.popleft
    push = work.append
    ntransfers = 0
    every = bool(getattr(data, "every_iteration", False))
    transfer = data.transfer if data is not None else None
    stream = _STREAM and transfer is None
    done_hook = getattr(data, "complete", None) if data is not None else None

    # iteration 0 alone first where that run, if it completes, decides the later ones
    phases = [iterations]
    if iterations > 1 and not every and _SHORTCUT and _repeats(plan, mac):
        phases = [1, iterations]
    for phase, iterations in enumerate(phases):
        if phase:
            if all(done) and not any(fifo):
                return SimResult(True, transfers=ntransfers * phases[-1])
            # on to the later iterations from where iteration 0 stopped: every schedule
            # ends in the same state, and no iteration-0 step is left (see _repeats)
            for b in range(nb):
                if done[b] and prog[b]:
                    done[b] = False
                    if not queued[b]:
                        queued[b] = True
                        push(b)
        while work:
            b = pop()
            queued[b] = False
            if done[b]:
                continue
            steps_b, nst, sc, rc, fifo_s, fifo_r, on_recv, on_send = info[b]
            # this threadblock's position, in locals while it runs (stored back when it stops)
            p, i, t, k = pc[b], it[b], tr[b], dcur[b]
            if nst == 0 or i >= iterations:
                done[b] = True
                waiting[b] = None
                continue
            # data sees iteration 0 only, unless it asks for every iteration
            feed = transfer is not None and (every or i == 0)
            hook = done_hook if every or i == 0 else None
            while True:
                g, snd, rcv, ntr, dl, hasdep, count = steps_b[p]
                if t == 0 and dl:
                    base = i * width
                    while k < len(dl):
                        tgt, idx = dl[k]
                        if tgt < 0 or flag[tgt] < base + idx:
                            break
                        k += 1
                    if k < len(dl):
                        tgt, idx = dl[k]
                        waiting[b] = (DEP, tgt, idx)
                        if tgt >= 0:
                            flag_wait[tgt].append((base + idx, b))
                        break
                while t < ntr:
                    if (stream and snd and not rcv and fifo_s is not None and not fifo_s
                            and recv_wait[sc] >= 0):
                        # the receiver waits at a receive-only step on this empty FIFO:
                        # both sides' transfers pass in one go (see _STREAM)
                        w = recv_wait[sc]
                        w_step = info[w][0][pc[w]]
                        w_ntr = w_step[3]
                        if w_step[2] and not w_step[1] and tr[w] < w_ntr:
                            m = min(ntr - t, w_ntr - tr[w])
                            t += m
                            tr[w] += m
                            ntransfers += 2 * m  # each side's, as when they go one by one
                            if tr[w] == w_ntr:
                                recv_wait[sc] = -1
                                if not queued[w]:
                                    queued[w] = True
                                    push(w)
                            continue
                    if rcv and not fifo_r:
                        waiting[b] = on_recv
                        if rc >= 0:
                            recv_wait[rc] = b
                        break
                    if snd and (fifo_s is None or len(fifo_s) >= capacity):
                        waiting[b] = on_send
                        if sc >= 0:
                            send_wait[sc] = b
                        break
                    payload = None
                    if rcv:
                        payload = fifo_r.popleft()
                        w = send_wait[rc]
                        if w >= 0:
                            send_wait[rc] = -1
                            if not queued[w]:
                                queued[w] = True
                                push(w)
                    if feed:
                        # chunks [t * mac, (t + 1) * mac) of a FIFO step, its last transfer
                        # (a local step's only one) up to its count
                        payload = transfer(g, t * mac, count if t + 1 == ntr else (t + 1) * mac,
                                           payload, i)
                    if snd:
                        fifo_s.append(payload)
                        w = recv_wait[sc]
                        if w >= 0:
                            recv_wait[sc] = -1
                            if not queued[w]:
                                queued[w] = True
                                push(w)
                    t += 1
                    ntransfers += 1
                else:
                    # the step is done
                    t = 0
                    k = 0
                    if hook is not None:
                        hook(g)
                    if hasdep:
                        v = flag[b] = i * width + p
                        fw = flag_wait[b]
                        if fw:
                            keep = []
                            for goal, w in fw:
                                if goal > v:
                                    keep.append((goal, w))
                                elif not queued[w]:
                                    queued[w] = True
                                    push(w)
                            flag_wait[b] = keep
                    p += 1
                    if p < nst:
                        continue
                    i += 1
                    p = 0
                    if i < iterations:
                        feed = transfer is not None and every
                        hook = done_hook if every else None
                        continue
                    done[b] = True
                    waiting[b] = None
                break
            pc[b], it[b], tr[b], dcur[b] = p, i, t, k
    stuck = [b for b in range(nb) if not done[b]]
    if not stuck:
        return SimResult(True, transfers=ntransfers)
    return SimResult(False, len(stuck), _cycle(plan, prog, stuck, waiting, pc, it, conns,
                                               capacity, done), ntransfers)


def _target(waiting, conns) -> int:
    kind, x, _ = waiting
    if kind == DEP:
        return x
    if x < 0:
        return -1
    return conns[x][C_SEND_BLOCK] if kind == RECV else conns[x][C_RECV_BLOCK]


def _cycle(plan: Plan, prog, stuck, waiting, pc, it, conns, capacity, done) -> list[Waiter]:
    """The shortest cycle of the wait-for graph (or the shortest chain to a dead end)."""
    nxt = {b: _target(waiting[b], conns) for b in stuck}
    best: list[int] | None = None
    state: dict[int, int] = {}
    for start in stuck:
        if start in state:
            continue
        path, pos = [], {}
        b = start
        while b in nxt and b not in state:
            state[b] = 1
            pos[b] = len(path)
            path.append(b)
            b = nxt[b]
        if b in pos:
            cyc = path[pos[b]:]
            if best is None or len(cyc) < len(best):
                best = cyc
        for p in path:
            state[p] = 2
    if best is None:
        # no cycle: every chain ends at a finished or missing threadblock
        chains = []
        for start in stuck:
            chain, b = [], start
            while b in nxt and b not in chain:
                chain.append(b)
                b = nxt[b]
            chains.append(chain)
        best = min(chains, key=len)
    return [_waiter(plan, prog, b, waiting[b], pc, it, conns, capacity, done) for b in best]


def _waiter(plan: Plan, prog, b, waiting, pc, it, conns, capacity, done) -> Waiter:
    blk = plan.blocks
    kind, x, idx = waiting
    g = prog[b][pc[b]][0]
    op = OP_NAMES[plan.steps[g, S_OP]]

    def who(t: int) -> str:
        if t < 0:
            return "a threadblock that does not exist"
        s = f"rank {blk[t, B_RANK]} tb {blk[t, B_TB]}"
        return s + (" (finished)" if done[t] else "")

    if kind == DEP:
        what = (f"{who(x)} to publish step {idx} of iteration {it[b]}" if x >= 0
                else "a threadblock that does not exist")
    elif kind == RECV:
        src = conns[x][C_SEND_BLOCK] if x >= 0 else -1
        chan = conns[x][C_CHAN] if x >= 0 else "?"
        what = f"data from {who(src)} on channel {chan} (FIFO empty)"
    else:
        dst = conns[x][C_RECV_BLOCK] if x >= 0 else -1
        chan = conns[x][C_CHAN] if x >= 0 else "?"
        what = f"room in the FIFO to {who(dst)} on channel {chan} (full: {capacity} transfers)"
    return Waiter(int(blk[b, B_RANK]), int(blk[b, B_TB]), int(pc[b]), op, int(it[b]), what)
