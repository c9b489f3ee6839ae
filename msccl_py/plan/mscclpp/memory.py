"""Memory, clocks and race detection for running an MSCCL++ plan in one process.

Buffers are NumPy arrays per rank (in-place calls alias them as the executor
does); LL packet space is a parallel array of payloads with a written flag.

Happens-before follows what the executor runs per thread
(:mod:`msccl_py.plan.mscclpp.threads`): each threadblock is two agents, its
``all`` threads (data operations, striped over the block) and its ``lead``
threads (signal, wait, flush, semaphores, port-channel puts, run by
``threadIdx.x < n``). A ``nop`` or ``barrier`` joins the two. Each agent has
two vector clocks: ``exe`` (execution order: every signal/wait, relaxed ones
included, barriers, semaphores and packets) and ``vis`` (data visibility: the
same but for relaxed signal/wait, which MSCCL++ documents as ordering
execution only). Touching memory another agent wrote is a race unless that
write is ``vis``-ordered first; writing memory another agent read is a race
unless that read is ``exe``-ordered first. Two data operations of one block
that touch the same memory with no ``nop`` or ``barrier`` between them race
too: each thread runs its own slices of both. :mod:`msccl_py.plan.mscclpp.execute`
drives it; :mod:`msccl_py.plan.mscclpp.races` words the findings.

>>> from msccl_py.plan.mscclpp.geometry import group_share
>>> group_share(64, 0, 2, 16)
(0, 32)
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from msccl_py.plan.mscclpp.geometry import buffer_views, geometry, group_share, pipeline_iterations
from msccl_py.mscclpp_ir import Op, Plan, Ref
from msccl_py.plan.mscclpp.races import describe, where

RELAXED = ("rlxsignal", "rlxwait")
MAX_FINDINGS = 20


@dataclass
class Result:
    """What :func:`execute` saw: outputs per rank, and one line per deadlocked threadblock or race."""
    outputs: list[np.ndarray]
    inputs: list[np.ndarray]
    deadlocks: list[str] = field(default_factory=list)
    races: list[str] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)
    semaphores: dict = field(default_factory=dict)    # (rank, id) -> (end count, acquires, releases), if changed
    writers: list = field(default_factory=list)       # per rank, per output element: last writing event
    events: list = field(default_factory=list)        # event -> (rank, threadblock, op index, name)

    def last_writer(self, rank: int, element: int) -> str | None:
        """The operation that last wrote ``rank``'s output ``element``, or None (never written)."""
        if not self.writers:
            return None
        ev = int(self.writers[rank][element])
        return where(self.events[ev]) if ev >= 0 else None


@dataclass
class Step:
    """One operation as a threadblock runs it: pipeline inner ops carry their slice."""
    op: Op
    index: int          # top-level op index in the threadblock
    offset: int = 0     # pipeline iteration offset (bytes)
    unit: int | None = None


@dataclass
class Semaphore:
    """A device semaphore of one rank: its count, and each releasing block's releases in order."""
    init: int
    value: int = 0
    acquired: int = 0
    releases: dict = field(default_factory=dict)    # block -> [(vis, exe, event)]

    def __post_init__(self):
        self.value = self.init


class PlanInvalid(Exception):
    """The plan cannot run as written (a chunk past a buffer, an alignment the data cannot meet)."""


def expand(plan: Plan, chunk: int, ops: list[Op]) -> list[Step]:
    """The threadblock's operations in execution order, pipelines unrolled."""
    steps = []
    for k, op in enumerate(ops):
        if op.name != "pipeline":
            steps.append(Step(op, k))
            continue
        for it in range(pipeline_iterations(op.num_chunks, chunk, op.unit_size)):
            for inner in op.ops:
                steps.append(Step(inner, k, it * op.unit_size, op.unit_size))
    return steps


class Machine:
    """Every rank's buffers, packets, signals, barriers and semaphores, and the happens-before clocks."""

    def __init__(self, plan: Plan, nbytes: int, inputs: list[np.ndarray], reduce, track: bool = True):
        self.plan = plan
        self.track = track
        self.geo = geometry(plan, nbytes)
        self.reduce = reduce
        dtype = inputs[0].dtype
        self.itemsize = dtype.itemsize
        if plan.buffer_alignment % self.itemsize:
            raise PlanInvalid(f"the plan's {plan.buffer_alignment}-byte alignment is not a multiple of "
                           f"the {self.itemsize}-byte element")
        fill = np.nan if np.issubdtype(dtype, np.floating) else np.iinfo(dtype).min
        self.fill = fill
        self.base = {}       # base id -> array
        self.view = {}       # (rank, buf) -> (base id, element offset, elements)
        for r, sizes in enumerate(self.geo.sizes):
            self._buffers(r, sizes, inputs[r], dtype, fill)
        self.pkt = {}        # (rank, buf) -> [values, valid, writer event]
        # per element: the event that last wrote it / read it since, and with which thread
        bases = self.base.items() if track else ()
        self.w_ev = {b: np.full(a.size, -1, np.int32) for b, a in bases}
        self.r_ev = {b: np.full(a.size, -1, np.int32) for b, a in bases}
        self.w_at = {b: np.zeros(a.size, np.int32) for b, a in bases}    # where that access started
        self.r_at = {b: np.zeros(a.size, np.int32) for b, a in bases}
        self.foreign = {}    # rank r's input/output base -> {event of another rank touching it: (element, verb)}
        self.unit = 16       # bytes a thread moves per slice in the operation about to run (set per operation)
        self.tbs = [(g.rank, tb) for g in plan.gpus for tb in g.threadblocks]
        self.gid = {(r, tb.id): i for i, (r, tb) in enumerate(self.tbs)}
        n = 2 * len(self.tbs)        # agents: 2 g = block g's threads, 2 g + 1 its lead threads
        self.agent_rank = np.repeat([r for r, _ in self.tbs], 2).astype(np.int64)
        self.vis = np.zeros((n, n), np.int64)
        self.exe = np.zeros((n, n), np.int64)
        self.synced = np.zeros(n, np.int64)      # an all-threads agent's own tick at its last block barrier
        self.ev_tb = np.zeros(1024, np.int64)    # event -> agent
        self.ev_clk = np.zeros(1024, np.int64)
        self.ev_pos = np.zeros(1024, np.int64)   # event -> position in its block's executed operations
        self.ev_per = np.ones(1024, np.int64)    # event -> elements per thread slice of its operation
        self.ev_where = []
        self.lead_log = [[] for _ in self.tbs]   # block -> [(lead tick, event)] of its lead operations
        self.last_lead = [-1] * len(self.tbs)    # block -> its last lead event since its last barrier
        self.early = {}      # block -> [(semaphore, acquire event, releaser block, k, k-th release of it)]
        self.snap = {}       # packet-writing event -> (vis, exe) clocks when it wrote
        self.races, self.race_pairs = [], set()
        self.inbound = {}    # (rank, type, channel) -> deque of (vis, exe) snapshots
        self.pair = self._pair_channels()
        self.barriers = {}   # (rank, id) -> [arrived gids, generation, {generation: (vis, exe)}]
        self.sem = {(g.rank, k): Semaphore(v) for g in plan.gpus for k, v in enumerate(g.semaphores)}

    def _buffers(self, r, sizes, inp, dtype, fill):
        bases, views = buffer_views(self.plan, r, sizes, self.itemsize)
        code, lo, ni = views["i"]
        if inp.size != ni:
            raise PlanInvalid(f"rank {r} input has {inp.size} elements, the plan needs {ni}")
        for name, n in bases.items():
            self.base[(r, name)] = np.full(n, fill, dtype)
        self.base[(r, code)][lo:lo + ni] = inp
        for buf, (name, off, n) in views.items():
            self.view[(r, buf)] = ((r, name), off, n)

    def _pair_channels(self):
        """(rank, type, channel) -> (peer, type, channel): the k-th channel A→B meets the k-th B→A."""
        ordinal, by_peer = {}, {}
        for g in self.plan.gpus:
            for t in ("memory", "port"):
                for c, peer in enumerate(g.channel_peers(t)):
                    lst = by_peer.setdefault((g.rank, t, peer), [])
                    ordinal[(g.rank, t, c)] = (peer, len(lst))
                    lst.append(c)
        pair = {}
        for (r, t, c), (peer, k) in ordinal.items():
            back = by_peer.get((peer, t, r), [])
            pair[(r, t, c)] = (peer, t, back[k]) if k < len(back) else (peer, t, None)
        return pair

    def event(self, a: int, rank: int, tb: int, index: int, name: str, pos: int = 0) -> int:
        """A new event of agent ``a`` (block ``a // 2``) running op ``index``; ticks its clocks."""
        self.vis[a, a] += 1
        self.exe[a, a] += 1
        ev = len(self.ev_where)
        if ev == self.ev_tb.size:
            grow = [np.concatenate([x, np.ones_like(x)]) for x in (self.ev_tb, self.ev_clk, self.ev_pos, self.ev_per)]
            self.ev_tb, self.ev_clk, self.ev_pos, self.ev_per = grow
        self.ev_tb[ev] = a
        self.ev_clk[ev] = self.exe[a, a]
        self.ev_pos[ev] = pos
        self.ev_per[ev] = max(self.unit // self.itemsize, 1)
        self.ev_where.append((rank, tb, index, name))
        if a % 2 and self.track:
            self.lead_log[a // 2].append((int(self.exe[a, a]), ev))
            self.last_lead[a // 2] = ev
        return ev

    def join(self, a: int, vis, exe) -> None:
        if vis is not None:
            np.maximum(self.vis[a], vis, out=self.vis[a])
        np.maximum(self.exe[a], exe, out=self.exe[a])

    def block_sync(self, g: int) -> None:
        """``__syncthreads()`` in block ``g``: its threads and its lead threads know the same."""
        if not self.track:           # a runtime: no clocks to keep
            return
        a, lead = 2 * g, 2 * g + 1
        for clock in (self.vis, self.exe):
            np.maximum(clock[a], clock[lead], out=clock[a])
            clock[lead] = clock[a]
        self.synced[a] = self.exe[a, a]
        self.last_lead[g] = -1

    def end_of_launch(self) -> list[str]:
        """Accesses to a rank's input or output by other ranks that its kernel can end before.

        When a rank's kernel ends its caller reads the output and may refill the
        input, so another rank's write there (or read there) must be ordered
        before the end of every block of that rank. Execution order suffices
        here (relaxed signals too): what the caller runs next starts after a
        kernel boundary.
        """
        out = []
        for base, events in self.foreign.items():
            end = self.exe[self.agent_rank == base[0]].max(axis=0, initial=0)
            for ev, (element, verb) in events.items():
                if end[self.ev_tb[ev]] < self.ev_clk[ev]:
                    out.append(describe(self, None, ev, verb, base, element, end))
                    break
        return out[:MAX_FINDINGS]

    # -- signals: the in-process machine keeps each signal's clocks until a wait takes it -------
    def has_signal(self, key) -> bool:
        return bool(self.inbound.get(key))

    def take_signal(self, a: int, key, relaxed: bool) -> None:
        vis, exe, _ = self.inbound[key].popleft()
        self.join(a, None if relaxed else vis, exe)

    def post_signal(self, a: int, key, where: str = "") -> None:
        self.inbound.setdefault(key, deque()).append((self.vis[a].copy(), self.exe[a].copy(), where))

    def idle(self) -> bool:
        """Called when no threadblock can move: True to try again (another process may act)."""
        return False

    # -- memory -------------------------------------------------------------------------------
    def span(self, step: Step, ref: Ref, rank: int, size_ref: Ref | None = None):
        """(offset, count) in elements of ``ref`` for this step, executor arithmetic."""
        c, a = self.geo.chunk, self.plan.buffer_alignment
        sref = size_ref or ref
        off, size = ref.index * c, sref.size * c
        if step.op.tbg is not None:
            o, size = group_share(size, step.op.tbg[0], step.op.tbg[1], a)
            off += o
        if step.unit is not None and step.op.name not in ("ppkt", "rppkt", "respkt", "cpkt", "upkt",
                                                           "repkt", "recpkt", "recspkt", "gstorepkt"):
            size = max(0, min(size - step.offset, step.unit))
            off += step.offset
        n = self.geo.sizes[rank][ref.buffer]
        if off < 0 or off + size > n:
            raise PlanInvalid(f"{step.op.path}: {ref.buffer}[chunks {ref.index}..{ref.index + sref.size - 1}]"
                           f" of rank {rank} is past the buffer's {n // c} chunks")
        return off // self.itemsize, size // self.itemsize

    def region(self, rank, buf, off, n):
        base, boff, _ = self.view[(rank, buf)]
        return base, boff + off, boff + off + n

    def touch(self, a, ev, base, lo, hi, write, same=None):
        """Check and record agent ``a``'s access to ``base[lo:hi]``; ``same``: where a write leaves
        the value as it was (two threads of one block writing the same value do not race)."""
        if hi <= lo or not self.track:
            return
        ranges = ((self.w_ev[base][lo:hi], self.w_at[base][lo:hi], self.vis[a], "wrote", same),)
        if write:
            ranges += ((self.r_ev[base][lo:hi], self.r_at[base][lo:hi], self.exe[a], "read", None),)
        for evs, at, clock, verb, benign in ranges:
            idx = np.nonzero(evs >= 0)[0]
            if idx.size:
                e = evs[idx]
                ag = self.ev_tb[e]
                clk = self.ev_clk[e]
                bad = (ag != a) & (clock[ag] < clk)
                if a % 2 == 0:      # the block's other threads, since its last nop or barrier
                    mine = (ag == a) & (clk > self.synced[a]) & (e != ev)
                    if mine.any():
                        j = idx[mine]
                        other = self.thread_of(lo + j - at[j], self.ev_per[e[mine]])
                        differ = other != self.thread_of(j, self.ev_per[ev])
                        if write and benign is not None:
                            differ &= ~benign[j]
                        mine[mine] = differ
                        bad |= mine
                if bad.any():
                    k = int(np.argmax(bad))
                    self._race(ev, int(e[k]), write, verb, base, lo + int(idx[k]))
        if base[0] != "p" and base[1] in ("i", "o") and self.agent_rank[a] != base[0]:
            self.foreign.setdefault(base, {}).setdefault(ev, (lo, "wrote" if write else "read"))
        if write:
            self.w_ev[base][lo:hi] = ev
            self.w_at[base][lo:hi] = lo
            self.r_ev[base][lo:hi] = -1
        else:
            self.r_ev[base][lo:hi] = ev
            self.r_at[base][lo:hi] = lo

    def thread_of(self, offset, per):
        """The thread of a block that a data operation touches the element ``offset`` elements past the
        start of its operand with: it stripes its range in slices of ``per`` elements over the
        block's threads (``idx = threadIdx.x; idx += blockDim.x``)."""
        return (offset // per) % self.plan.num_threads_per_block

    def _race(self, ev, other, write, verb, base, element):
        key = (self.ev_where[ev][:3], self.ev_where[other][:3])
        if key in self.race_pairs or len(self.races) >= MAX_FINDINGS:
            return
        self.race_pairs.add(key)
        self.races.append(describe(self, ev, other, verb, base, element, write=write))

    def read(self, a, ev, rank, buf, off, n):
        base, lo, hi = self.region(rank, buf, off, n)
        self.touch(a, ev, base, lo, hi, False)
        return self.base[base][lo:hi].copy()

    def write(self, a, ev, rank, buf, off, values):
        base, lo, hi = self.region(rank, buf, off, values.size)
        self.touch(a, ev, base, lo, hi, True, self.base[base][lo:hi] == values if self.track else None)
        self.base[base][lo:hi] = values
        if buf == "s" and self.plan.packets and (rank, "s") in self.pkt:
            # LL scratch is one memory: data element e shares bytes with packet e // 2
            vals, ok, _ = self.pkt[(rank, "s")]
            start, stop = off // 2, -(-(off + values.size) // 2)
            self.touch(a, ev, ("p", rank, "s"), start, stop, True)
            ok[start:stop] = False

    def clobber_data(self, a, ev, rank, buf, off, n):
        """A packet write over payload [off, off+n) overwrites scratch data elements [2 off, 2 off + 2n)."""
        if buf == "s" and self.plan.packets:
            base, lo, n_all = self.view[(rank, "s")]
            start, stop = min(2 * off, n_all), min(2 * (off + n), n_all)
            if stop > start:
                self.touch(a, ev, base, lo + start, lo + stop, True)
                self.base[base][lo + start:lo + stop] = self.fill

    def packets(self, rank, buf):
        key = (rank, buf)
        if key not in self.pkt:
            n = self.view[key][2]
            dtype = self.base[self.view[key][0]].dtype
            self.pkt[key] = [np.zeros(n, dtype), np.zeros(n, bool), np.full(n, -1, np.int64)]
            if self.track:
                self.w_ev[("p", rank, buf)] = self.pkt[key][2]
                self.r_ev[("p", rank, buf)] = np.full(n, -1, np.int32)
                self.w_at[("p", rank, buf)] = np.zeros(n, np.int32)
                self.r_at[("p", rank, buf)] = np.zeros(n, np.int32)
        return self.pkt[key]

    def packets_ready(self, rank, buf, off, n):
        return bool(self.packets(rank, buf)[1][off:off + n].all())

    def read_packets(self, a, ev, rank, buf, off, n):
        vals, valid, writers = self.packets(rank, buf)
        w = writers[off:off + n] if self.track else writers[:0]
        w = np.unique(w[w >= 0])
        for e in w:                      # a packet read waits for its writer: it orders after it
            self.join(a, *self.snap[int(e)])
        if self.track:
            self.r_ev[("p", rank, buf)][off:off + n] = ev
            self.r_at[("p", rank, buf)][off:off + n] = off
        return vals[off:off + n].copy()

    def write_packets(self, a, ev, rank, buf, off, values, valid=None):
        vals, ok, writers = self.packets(rank, buf)
        if self.track and ev not in self.snap:
            self.snap[ev] = (self.vis[a].copy(), self.exe[a].copy())
        same = (vals[off:off + values.size] == values) & ok[off:off + values.size] if self.track else None
        self.touch(a, ev, ("p", rank, buf), off, off + values.size, True, same)
        vals[off:off + values.size] = values
        ok[off:off + values.size] = True if valid is None else valid
        self.clobber_data(a, ev, rank, buf, off, values.size)

    def copy_packets(self, a, ev, src_rank, src_buf, soff, dst_rank, dst_buf, doff, n):
        vals, ok, _ = self.packets(src_rank, src_buf)
        self.write_packets(a, ev, dst_rank, dst_buf, doff, vals[soff:soff + n].copy(), ok[soff:soff + n].copy())
