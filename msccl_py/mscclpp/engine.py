"""Memory, clocks and race detection for running an MSCCL++ plan in one process.

Buffers are NumPy arrays per rank (in-place calls alias them as the executor
does); LL packet space is a parallel array of payloads with a written flag.
Happens-before uses two vector clocks per threadblock: ``exe`` (execution
order: every signal/wait, relaxed ones included, barriers, semaphores and
packets) and ``vis`` (data visibility: the same but for relaxed signal/wait,
which MSCCL++ documents as ordering execution only). Touching memory another
threadblock wrote is a race unless that write is ``vis``-ordered first;
writing memory another threadblock read is a race unless that read is
``exe``-ordered first. :mod:`msccl_py.mscclpp.interp` drives it.

>>> from msccl_py.mscclpp.geometry import group_share
>>> group_share(64, 0, 2, 16)
(0, 32)
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from msccl_py.mscclpp.geometry import buffer_views, geometry, group_share, pipeline_iterations
from msccl_py.mscclpp.ir import Op, Plan, Ref

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


@dataclass
class Step:
    """One operation as a threadblock runs it: pipeline inner ops carry their slice."""
    op: Op
    index: int          # top-level op index in the threadblock
    offset: int = 0     # pipeline iteration offset (bytes)
    unit: int | None = None


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
        self.w_ev = {b: np.full(a.size, -1, np.int64) for b, a in self.base.items()}
        self.r_ev = {b: np.full(a.size, -1, np.int64) for b, a in self.base.items()}
        self.tbs = [(g.rank, tb) for g in plan.gpus for tb in g.threadblocks]
        self.gid = {(r, tb.id): i for i, (r, tb) in enumerate(self.tbs)}
        n = len(self.tbs)
        self.vis = np.zeros((n, n), np.int64)
        self.exe = np.zeros((n, n), np.int64)
        self.ev_tb = np.zeros(1024, np.int64)
        self.ev_clk = np.zeros(1024, np.int64)
        self.ev_where = []
        self.snap = {}       # packet-writing event -> (vis, exe) clocks when it wrote
        self.races, self.race_pairs = [], set()
        self.inbound = {}    # (rank, type, channel) -> deque of (vis, exe) snapshots
        self.pair = self._pair_channels()
        self.barriers = {}   # (rank, id) -> [arrived gids, generation]
        self.sem = {(g.rank, k): [v, deque()] for g in plan.gpus for k, v in enumerate(g.semaphores)}

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

    def event(self, g: int, rank: int, tb: int, index: int, name: str) -> int:
        """A new event for threadblock ``g`` running op ``index``; ticks its clocks."""
        self.vis[g, g] += 1
        self.exe[g, g] += 1
        ev = len(self.ev_where)
        if ev == self.ev_tb.size:
            self.ev_tb = np.concatenate([self.ev_tb, np.zeros_like(self.ev_tb)])
            self.ev_clk = np.concatenate([self.ev_clk, np.zeros_like(self.ev_clk)])
        self.ev_tb[ev] = g
        self.ev_clk[ev] = self.exe[g, g]
        self.ev_where.append((rank, tb, index, name))
        return ev

    def join(self, g: int, vis, exe) -> None:
        if vis is not None:
            np.maximum(self.vis[g], vis, out=self.vis[g])
        np.maximum(self.exe[g], exe, out=self.exe[g])

    # -- signals: the in-process machine keeps each signal's clocks until a wait takes it -------
    def has_signal(self, key) -> bool:
        return bool(self.inbound.get(key))

    def take_signal(self, g: int, key, relaxed: bool) -> None:
        vis, exe, _ = self.inbound[key].popleft()
        self.join(g, None if relaxed else vis, exe)

    def post_signal(self, g: int, key, where: str = "") -> None:
        self.inbound.setdefault(key, deque()).append((self.vis[g].copy(), self.exe[g].copy(), where))

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

    def touch(self, g, ev, base, lo, hi, write):
        if hi <= lo or not self.track:
            return
        ranges = ((self.w_ev[base][lo:hi], self.vis[g], "wrote"),)
        if write:
            ranges += ((self.r_ev[base][lo:hi], self.exe[g], "read"),)
        for evs, clock, verb in ranges:
            mask = evs >= 0
            if mask.any():
                e = evs[mask]
                tb = self.ev_tb[e]
                clk = self.ev_clk[e]
                bad = (tb != g) & (clock[tb] < clk)
                if bad.any():
                    self._race(ev, int(e[np.argmax(bad)]), write, verb, base, lo)
        if write:
            self.w_ev[base][lo:hi] = ev
            self.r_ev[base][lo:hi] = -1
        else:
            self.r_ev[base][lo:hi] = ev

    def _race(self, ev, other, write, verb, base, lo):
        key = (self.ev_where[ev][:3], self.ev_where[other][:3])
        if key in self.race_pairs or len(self.races) >= MAX_FINDINGS:
            return
        self.race_pairs.add(key)
        r, t, k, name = self.ev_where[ev][:4]
        r2, t2, k2, name2 = self.ev_where[other][:4]
        buf = "scratch packets" if base[0] == "p" else {"i": "input", "o": "output", "s": "scratch"}[base[1]]
        owner = base[1] if base[0] == "p" else base[0]
        self.races.append(
            f"race: rank {r} threadblock {t} op {k} ({name}) {'writes' if write else 'reads'} rank "
            f"{owner} {buf} element {lo} that rank {r2} threadblock {t2} op {k2} ({name2}) {verb} "
            f"with no signal/wait, barrier or semaphore ordering them")

    def read(self, g, ev, rank, buf, off, n):
        base, lo, hi = self.region(rank, buf, off, n)
        self.touch(g, ev, base, lo, hi, False)
        return self.base[base][lo:hi].copy()

    def write(self, g, ev, rank, buf, off, values):
        base, lo, hi = self.region(rank, buf, off, values.size)
        self.touch(g, ev, base, lo, hi, True)
        self.base[base][lo:hi] = values
        if buf == "s" and self.plan.packets and (rank, "s") in self.pkt:
            # LL scratch is one memory: data element e shares bytes with packet e // 2
            vals, ok, _ = self.pkt[(rank, "s")]
            start, stop = off // 2, -(-(off + values.size) // 2)
            self.touch(g, ev, ("p", rank, "s"), start, stop, True)
            ok[start:stop] = False

    def clobber_data(self, g, ev, rank, buf, off, n):
        """A packet write over payload [off, off+n) overwrites scratch data elements [2 off, 2 off + 2n)."""
        if buf == "s" and self.plan.packets:
            base, lo, n_all = self.view[(rank, "s")]
            start, stop = min(2 * off, n_all), min(2 * (off + n), n_all)
            if stop > start:
                self.touch(g, ev, base, lo + start, lo + stop, True)
                self.base[base][lo + start:lo + stop] = self.fill

    def packets(self, rank, buf):
        key = (rank, buf)
        if key not in self.pkt:
            n = self.view[key][2]
            dtype = self.base[self.view[key][0]].dtype
            self.pkt[key] = [np.zeros(n, dtype), np.zeros(n, bool), np.full(n, -1, np.int64)]
            self.w_ev[("p", rank, buf)] = self.pkt[key][2]
            self.r_ev[("p", rank, buf)] = np.full(n, -1, np.int64)
        return self.pkt[key]

    def packets_ready(self, rank, buf, off, n):
        return bool(self.packets(rank, buf)[1][off:off + n].all())

    def read_packets(self, g, ev, rank, buf, off, n):
        vals, valid, writers = self.packets(rank, buf)
        w = writers[off:off + n] if self.track else writers[:0]
        w = np.unique(w[w >= 0])
        for e in w:                      # a packet read waits for its writer: it orders after it
            self.join(g, *self.snap[int(e)])
        self.r_ev[("p", rank, buf)][off:off + n] = ev
        return vals[off:off + n].copy()

    def write_packets(self, g, ev, rank, buf, off, values, valid=None):
        vals, ok, writers = self.packets(rank, buf)
        if self.track and ev not in self.snap:
            self.snap[ev] = (self.vis[g].copy(), self.exe[g].copy())
        self.touch(g, ev, ("p", rank, buf), off, off + values.size, True)
        vals[off:off + values.size] = values
        ok[off:off + values.size] = True if valid is None else valid
        self.clobber_data(g, ev, rank, buf, off, values.size)

    def copy_packets(self, g, ev, src_rank, src_buf, soff, dst_rank, dst_buf, doff, n):
        vals, ok, _ = self.packets(src_rank, src_buf)
        self.write_packets(g, ev, dst_rank, dst_buf, doff, vals[soff:soff + n].copy(), ok[soff:soff + n].copy())
