"""Run an MSCCL++ plan in one process: each operation with the executor's semantics.

:func:`execute` is what the plan verifier and the reference runtime share.
Every threadblock of every rank is a cursor over its operations (pipelines
unrolled for the call's size); the scheduler runs each until it blocks (a
wait with no signal left on its channel, a barrier or semaphore not yet
released, an LL packet not yet written) and stops when all finish or none
can move. Memory, clocks and race detection live in
:mod:`msccl_py.plan.mscclpp.memory`.

>>> import numpy as np
>>> from msccl_py.targets.mscclpp.read import read_plan_text
>>> plan = read_plan_text('{"name":"c","collective":"test","protocol":"Simple","inplace":false,'
...   '"gpus":[{"id":0,"input_chunks":1,"output_chunks":1,"scratch_chunks":0,"channels":[],'
...   '"remote_buffers":[],"threadblocks":[{"id":0,"channels":[],"ops":[{"name":"copy",'
...   '"src_buff":[{"type":"i","index":0,"size":1}],"dst_buff":[{"type":"o","index":0,"size":1}]}]}]}]}')
>>> res = execute(plan, 64, [np.arange(16, dtype=np.float32)])
>>> res.outputs[0][:4], res.deadlocks, res.races
(array([0., 1., 2., 3.], dtype=float32), [], [])
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from msccl_py.plan.mscclpp.memory import RELAXED, Result, PlanInvalid, Machine, Step, expand
from msccl_py.mscclpp_ir import Ref
from msccl_py.plan.mscclpp.races import where
from msccl_py.plan.mscclpp.threads import ALL, SPLIT, SYNC, kind

#: operations that read LL packets, and which of their sources are packets (the rest is data)
_PACKET_SOURCES = {"rppkt": slice(0, 1), "upkt": slice(0, 1), "gstorepkt": slice(0, 1),
                   "repkt": slice(1, None), "respkt": slice(1, None), "recpkt": slice(1, None),
                   "recspkt": slice(1, None)}


def execute(plan, nbytes: int, inputs: list[np.ndarray], reduce=np.add, track: bool = True) -> Result:
    """Run ``plan`` on ``inputs`` (one array per rank) for a call of ``nbytes``.

    Returns the output buffer of each rank, plus one line per deadlocked
    threadblock, race, or operation the executor cannot run. ``track=False``
    skips race detection (a runtime only wants the data).
    """
    try:
        m = Machine(plan, nbytes, inputs, reduce, track)
    except PlanInvalid as exc:
        return Result([], inputs, invalid=[f"invalid: {exc}"])
    run = Runner(m)
    try:
        run.loop()
    except PlanInvalid as exc:
        return Result([], inputs, invalid=[f"invalid: {exc}"])
    outputs = []
    for r in range(plan.nranks):
        base, lo, n = m.view[(r, "o")]
        outputs.append(m.base[base][lo:lo + n].copy())
    res = Result(outputs, inputs, deadlocks=run.deadlocks, races=m.races)
    if not run.deadlocks:
        res.races += m.end_of_launch() + run.leftover_signals()
        res.races += run.unfenced_signals(res.races)
        res.races += run.early_acquires(res.races)
        res.semaphores = {key: (sem.value, sem.acquired, sem.value - sem.init + sem.acquired)
                          for key, sem in m.sem.items() if sem.value != sem.init}
    res.writers, res.events = run.output_writers(), m.ev_where
    return res


#: lead operations that tell a peer or block that this block's writes so far are done
FENCED = frozenset({"signal", "sem_release", "pws", "pwsf"})
#: operations that move data one LL packet (8 bytes of payload) per thread slice; the others move 16
PACKET_OPS = frozenset({"ppkt", "rppkt", "cpkt", "upkt", "repkt", "respkt", "recpkt", "recspkt", "gstorepkt"})


def _nth(k: int) -> str:
    return f"{k}{'th' if 10 <= k % 100 < 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(k % 10, 'th')}"


class Runner:
    """Cursors over each threadblock's steps and the scheduler that advances them on a :class:`Machine`."""

    def __init__(self, m: Machine):
        self.m = m
        self.steps = [expand(m.plan, m.geo.chunk, tb.ops) for _, tb in m.tbs]
        self.pos = [0] * len(self.steps)
        self.arrived = {}        # gid -> (barrier key, generation) while waiting at a barrier
        self.deadlocks = []
        self.sent, self.waited = Counter(), Counter()
        self.released = {}       # (rank, semaphore) -> {gid: [description of each release]}
        self.wrote = {}          # gid -> its last all-thread writing event since its last barrier
        self.unfenced = []       # (signal event, write event) with no barrier between them
        for g, steps in enumerate(self.steps):
            rank = m.tbs[g][0]
            for st in steps:
                for c in st.op.channels if st.op.channel_type in ("memory", "port") else ():
                    key = (rank, st.op.channel_type, c)
                    if st.op.name in ("signal", "rlxsignal") or (st.op.name in ("pws", "pwsf")
                                                                 and st.op.channel_type == "port"):
                        self.sent[m.pair[key]] += 1
                    elif st.op.name in ("wait", "rlxwait"):
                        self.waited[key] += 1
                if st.op.name == "sem_release":
                    for s in st.op.semaphores:
                        self.released.setdefault((rank, s), {}).setdefault(g, []).append(
                            where((rank, m.tbs[g][1].id, st.index, "sem_release")))

    def loop(self) -> None:
        """Run until every threadblock finishes or none can move (then fill ``deadlocks``)."""
        todo = set(range(len(self.steps)))
        while todo:
            moved = False
            for g in sorted(todo):
                while self.pos[g] < len(self.steps[g]):
                    st = self.steps[g][self.pos[g]]
                    if self.blocked(g, st) is not None:
                        break
                    self.run(g, st)
                    self.pos[g] += 1
                    moved = True
                if self.pos[g] == len(self.steps[g]):
                    todo.discard(g)
            if todo and not moved:
                if self.m.idle():
                    continue
                for g in sorted(todo):
                    st = self.steps[g][self.pos[g]]
                    rank, tb = self.m.tbs[g][0], self.m.tbs[g][1].id
                    self.deadlocks.append(f"deadlock: rank {rank} threadblock {tb} op {st.index} "
                                          f"({st.op.name}) {self.blocked(g, st)}")
                return

    # -- blocking ---------------------------------------------------------------------------
    def blocked(self, g: int, st: Step) -> str | None:
        m, op = self.m, st.op
        rank = m.tbs[g][0]
        if op.name in ("wait", "rlxwait"):
            for c in op.channels:
                key = (rank, op.channel_type, c)
                if not m.has_signal(key):
                    peer = m.plan.gpus[rank].channel_peers(op.channel_type)[c]
                    return (f"waits on {op.channel_type} channel {c} from rank {peer}, which the plan "
                            f"signals {self.sent[key]} times for {self.waited[key]} waits")
            return None
        if op.name == "barrier":
            key = (rank, op.barrier_id)
            if g in self.arrived:
                gen = self.arrived[g][1]
                if m.barriers[key][1] > gen:
                    return None
                return (f"waits at barrier {op.barrier_id} for {op.num_threadblocks} threadblocks, "
                        f"{len(m.barriers[key][0])} arrived")
            return None
        if op.name == "sem_acquire":
            for s in op.semaphores:
                sem = m.sem[(rank, s)]
                if sem.value <= 0:
                    made = sum(len(r) for r in self.released.get((rank, s), {}).values())
                    return (f"acquires semaphore {s} (initial value {sem.init}) for the "
                            f"{_nth(sem.acquired + 1)} time, which the plan releases {made} times")
            return None
        packets = _PACKET_SOURCES.get(op.name)
        if packets is not None:
            for ref in op.src[packets]:
                off, n = m.span(st, ref, rank, op.src[0])
                if not m.packets_ready(rank, ref.buffer, off, n):
                    return (f"reads LL packets {ref.buffer}[chunk {ref.index}] that no threadblock "
                            f"has written")
        return None

    # -- running ----------------------------------------------------------------------------
    def run(self, g: int, st: Step) -> None:
        m, op = self.m, st.op
        rank, tb = m.tbs[g][0], m.tbs[g][1].id
        if op.name == "barrier" and g in self.arrived:
            key, gen = self.arrived.pop(g)
            met = m.barriers[key][2].pop((gen, g))
            for a in (2 * g, 2 * g + 1):
                m.join(a, *met)
            m.block_sync(g)
            return
        name, k = op.name, kind(op)
        a = 2 * g if k == ALL else 2 * g + 1
        m.unit = 8 if name in PACKET_OPS else 16
        ev = m.event(a, rank, tb, st.index, name, self.pos[g])
        if m.track:
            self._fence(g, ev, k, op)
        if name in ("nop", "barrier"):
            m.block_sync(g)
            if name == "barrier" and op.num_threadblocks > 1:
                self.arrive(g, rank, st)
            return
        if name == "flush":
            return
        if name in ("signal", "rlxsignal"):
            for c in op.channels:
                self.signal(g, rank, op.channel_type, c, st)
            return
        if name in ("wait", "rlxwait"):
            for c in op.channels:
                m.take_signal(a, (rank, op.channel_type, c), name in RELAXED)
            return
        if name == "sem_release":
            for s in op.semaphores:
                sem = m.sem[(rank, s)]
                sem.value += 1
                if m.track:
                    sem.releases.setdefault(g, []).append((m.vis[a].copy(), m.exe[a].copy(), ev))
            return
        if name == "sem_acquire":
            for s in op.semaphores:
                self.acquire(g, a, ev, rank, s)
            return
        getattr(self, "op_" + name)(a, ev, rank, st)
        if name in ("pws", "pwsf") and op.channel_type == "port":
            for c in op.channels:
                self.signal(g, rank, "port", c, st)

    def _fence(self, g: int, ev: int, k: str, op) -> None:
        """Note a signal that follows an all-thread write with no barrier between them."""
        if k == SYNC:
            self.wrote.pop(g, None)
        elif k == ALL and op.dst:
            self.wrote[g] = ev
        elif op.name in FENCED and g in self.wrote:
            self.unfenced.append((ev, self.wrote[g]))

    def unfenced_signals(self, races: list[str]) -> list[str]:
        """One race line per signal (or release) right after an all-thread write with no nop or
        barrier between them, unless a race already found names the two."""
        out, seen = [], set()
        for ev, write in self.unfenced:
            sig, wr = self.m.ev_where[ev], self.m.ev_where[write]
            if (sig[:3], wr[:3]) in seen:
                continue
            seen.add((sig[:3], wr[:3]))
            tail = f"after op {wr[2]} ({wr[3]})"
            if any(where(sig) in line and tail in line for line in races):
                continue
            out.append(f"race: {where(sig)} runs on its block's first threads right after op {wr[2]} "
                       f"({wr[3]}), which every thread runs, with no nop or barrier between them: it can "
                       f"tell its peer before the block's other threads have written their slices")
        return out

    def early_acquires(self, races: list[str]) -> list[str]:
        """Acquires that passed on a semaphore's initial value although the release they pair with
        (the k-th, for the k-th acquire) does not wait for them, so the initial value is not
        needed to go on: it only lets the acquire pass before that release. (A release that does
        wait for the acquire, a slot handed back, needs the initial value, and is not reported.)
        Reported here when no data race found already names the acquire."""
        m, out = self.m, []
        for g, passes in sorted(m.early.items()):
            for s, ev, j, k, release in passes:
                snaps = m.sem[(m.ev_where[ev][0], s)].releases.get(j, [])
                if len(snaps) >= k and snaps[k - 1][1][m.ev_tb[ev]] >= m.ev_clk[ev]:
                    continue
                acq = where(m.ev_where[ev])
                if any(acq in line for line in races + out):
                    continue
                init = m.sem[(m.ev_where[ev][0], s)].init
                out.append(f"race: {acq} passes on semaphore {s}'s initial value {init} before the release "
                           f"it pairs with, {release}, which does not wait for it: the semaphore no longer "
                           f"orders threadblock {m.ev_where[ev][1]}'s operations after the acquire behind "
                           f"that threadblock's operations before the release")
        return out

    def acquire(self, g: int, a: int, ev: int, rank: int, s: int) -> None:
        """The executor's count semantics: the k-th acquire is ordered after k - init releases.

        Which releases is known only per releasing block: with others releasing
        ``n`` times in the launch, this acquire follows at least the
        ``k - init - n``-th release of that block.
        """
        m = self.m
        sem = m.sem[(rank, s)]
        sem.acquired += 1
        sem.value -= 1
        need = sem.acquired - sem.init
        static = self.released.get((rank, s), {})
        if need <= 0:
            for j, releases in static.items():
                if j != g and len(releases) >= sem.acquired and m.track:
                    m.early.setdefault(g, []).append((s, ev, j, sem.acquired, releases[sem.acquired - 1]))
            return
        if not m.track:
            return
        total = sum(len(r) for r in static.values())
        for j, snaps in sem.releases.items():
            index = need - (total - len(static.get(j, ())))
            if index >= 1:
                m.join(a, *snaps[index - 1][:2])

    def arrive(self, g, rank, st):
        m, op = self.m, st.op
        key = (rank, op.barrier_id)
        state = m.barriers.setdefault(key, [[], 0, {}])
        state[0].append(g)
        self.arrived[g] = (key, state[1])
        self.pos[g] -= 1                      # stay on the barrier until the generation completes
        if len(state[0]) >= op.num_threadblocks:
            vis = np.max([m.vis[2 * x] for x in state[0]], axis=0)
            exe = np.max([m.exe[2 * x] for x in state[0]], axis=0)
            for x in state[0]:
                state[2][(state[1], x)] = (vis, exe)
            state[0], state[1] = [], state[1] + 1

    def signal(self, g, rank, ctype, c, st):
        where_ = f"rank {rank} threadblock {self.m.tbs[g][1].id} op {st.index} ({st.op.name})"
        self.m.post_signal(2 * g + 1, self.m.pair[(rank, ctype, c)], where_)

    def output_writers(self) -> list[np.ndarray]:
        """Per rank, the event that last wrote each output element (-1: never written)."""
        m = self.m
        if not m.track:
            return []
        out = []
        for r in range(m.plan.nranks):
            base, lo, n = m.view[(r, "o")]
            out.append(m.w_ev[base][lo:lo + n])
        return out

    def leftover_signals(self) -> list[str]:
        """One race line per channel left holding signals no wait took (the next launch's waits pass early)."""
        out = []
        for key, q in sorted(self.m.inbound.items(), key=lambda kv: str(kv[0])):
            if q and not self.deadlocks:
                r, t, c = key
                to = (f"rank {r}'s {t} channel {c}" if c is not None else
                      f"rank {r}, which has no {t} channel back to pair it with")
                out.append(f"race: {q[-1][2]} signals {to}, where no wait takes it ({len(q)} signal(s) "
                           f"left); the next launch's wait there passes early")
        return out

    # -- data operations (executor semantics) ----------------------------------------------
    def rd(self, a, ev, st, ref: Ref, rank, size_ref):
        off, n = self.m.span(st, ref, ref.rank if ref.rank is not None else rank, size_ref)
        return self.m.read(a, ev, ref.rank, ref.buffer, off, n)

    def wr(self, a, ev, st, ref: Ref, rank, size_ref, values):
        off, n = self.m.span(st, ref, ref.rank, size_ref)
        if n != values.size:
            values = values[:n] if values.size > n else np.concatenate(
                [values, self.m.read(a, ev, ref.rank, ref.buffer, off + values.size, n - values.size)])
        self.m.write(a, ev, ref.rank, ref.buffer, off, values)

    def op_copy(self, a, ev, rank, st):
        src, dst = st.op.src[0], st.op.dst[0]
        self.wr(a, ev, st, dst, rank, src, self.rd(a, ev, st, src, rank, src))

    def op_put(self, a, ev, rank, st):
        op = st.op
        for i, dst in enumerate(op.dst):
            src = op.src[i] if i < len(op.src) else op.src[0]
            self.wr(a, ev, st, dst, rank, dst, self.rd(a, ev, st, src, rank, dst))

    op_pws = op_pwsf = op_put

    def op_get(self, a, ev, rank, st):
        # the executor swaps the offsets: it reads the remote buffer at the local (dst) offset
        # and writes the local buffer at the remote (src) offset
        op = st.op
        for i, src in enumerate(op.src):
            dst = op.dst[i]
            remote = Ref(src.kind, src.buffer, dst.index, src.size, src.rank, src.remote)
            local = Ref(dst.kind, dst.buffer, src.index, dst.size, dst.rank)
            self.wr(a, ev, st, local, rank, src, self.rd(a, ev, st, remote, rank, src))

    def _reduce(self, a, ev, rank, st, first, rest):
        acc = self.rd(a, ev, st, first, rank, st.op.src[0])
        for ref in rest:
            acc = self.m.reduce(acc, self.rd(a, ev, st, ref, rank, st.op.src[0]))
        return acc

    def op_re(self, a, ev, rank, st):
        op = st.op
        val = self._reduce(a, ev, rank, st, op.src[0], op.src[1:])
        for dst in op.dst:
            self.wr(a, ev, st, dst, rank, op.src[0], val)

    op_res = op_rre = op_rres = op_re

    def _pkt_in(self, a, ev, rank, st, ref):
        off, n = self.m.span(st, ref, rank, st.op.src[0])
        return self.m.read_packets(a, ev, rank, ref.buffer, off, n)

    def _pkt_out(self, a, ev, rank, st, ref, values):
        off, n = self.m.span(st, ref, ref.rank, st.op.src[0])
        self.m.write_packets(a, ev, ref.rank, ref.buffer, off, values[:n])

    def op_ppkt(self, a, ev, rank, st):
        op = st.op
        for i, dst in enumerate(op.dst):
            src = op.src[i] if i < len(op.src) else op.src[0]
            if op.channel_type == "port":    # raw packet bytes, flags included
                so, n = self.m.span(st, src, rank, src)
                do, _ = self.m.span(st, dst, dst.rank, src)
                self.m.copy_packets(a, ev, rank, src.buffer, so, dst.rank, dst.buffer, do, n)
            else:
                self._pkt_out(a, ev, rank, st, dst, self.rd(a, ev, st, src, rank, src))

    def op_rppkt(self, a, ev, rank, st):
        vals = self._pkt_in(a, ev, rank, st, st.op.src[0])
        if st.op.channel_type == "port":   # every thread reads, the block syncs, a few threads post
            m, g = self.m, a // 2
            m.block_sync(g)
            a = a + 1
            ev = m.event(a, rank, m.tbs[g][1].id, st.index, SPLIT, self.pos[g])
        for dst in st.op.dst:
            self._pkt_out(a, ev, rank, st, dst, vals)

    def op_cpkt(self, a, ev, rank, st):
        self._pkt_out(a, ev, rank, st, st.op.dst[0], self.rd(a, ev, st, st.op.src[0], rank, st.op.src[0]))

    def op_upkt(self, a, ev, rank, st):
        self.wr(a, ev, st, st.op.dst[0], rank, st.op.src[0], self._pkt_in(a, ev, rank, st, st.op.src[0]))

    def op_repkt(self, a, ev, rank, st):
        op = st.op
        acc = self.rd(a, ev, st, op.src[0], rank, op.src[0])
        for ref in op.src[1:]:
            acc = self.m.reduce(acc, self._pkt_in(a, ev, rank, st, ref))
        self.wr(a, ev, st, op.dst[0], rank, op.src[0], acc)
        packet_dsts = {"repkt": 1, "respkt": 1, "recpkt": 1, "recspkt": 1}[op.name]
        if op.name in ("recpkt", "recspkt") and len(op.dst) > 1:
            self._pkt_out(a, ev, rank, st, op.dst[1], acc)
            packet_dsts = 2
        if op.name in ("respkt", "recspkt"):
            for dst in op.dst[packet_dsts:]:
                self._pkt_out(a, ev, rank, st, dst, acc)

    op_respkt = op_recpkt = op_recspkt = op_repkt

    def _group(self, rank, ref):
        return self.m.plan.gpus[rank].switch_channels[ref.switch].ranks

    def op_glres(self, a, ev, rank, st):
        op = st.op
        src, dst = op.src[0], op.dst[0]
        acc = None
        for r in self._group(rank, src):
            v = self.rd(a, ev, st, Ref("remote", src.buffer, src.index, src.size, r), rank, src)
            acc = v if acc is None else self.m.reduce(acc, v)
        for r in self._group(rank, dst):
            self.wr(a, ev, st, Ref("remote", dst.buffer, dst.index, dst.size, r), rank, src, acc)

    def op_gstore(self, a, ev, rank, st):
        src, dst = st.op.src[0], st.op.dst[0]
        val = self.rd(a, ev, st, src, rank, src)
        for r in self._group(rank, dst):
            self.wr(a, ev, st, Ref("remote", dst.buffer, dst.index, dst.size, r), rank, src, val)

    def op_gstorepkt(self, a, ev, rank, st):
        src, dst = st.op.src[0], st.op.dst[0]
        val = self._pkt_in(a, ev, rank, st, src)
        for r in self._group(rank, dst):
            self._pkt_out(a, ev, rank, st, Ref("remote", "s", dst.index, dst.size, r), val)
