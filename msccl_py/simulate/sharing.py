"""Bandwidth shares among the connections that are busy at the same time.

A resource (a link, a NIC, a GPU's protocol budget) carries the connections
whose paths cross it. Sharing it among all of them in proportion to their
bytes over the whole call is safe but pessimistic: a connection used in one
short phase (a 2-D ring's second dimension, a staggered ring channel) would
run at its small share even while it is the only one busy. So the engine
shares a resource among the connections busy *with* each one instead:

    share of c on r = load(c) / peak load on r while c sends

where ``load`` is a connection's bytes per iteration and the peak is the
largest sum of the loads of the connections sending on ``r`` at one instant
of ``c``'s sends. It is capacity-safe: at any instant, every busy connection's
peak is at least the busy ones' total, so their shares sum to at most 1. Where
every connection on a resource overlaps every other, the peak is the total
and the share is the whole-call one.

Busy times come from a pass at the whole-call shares; the shares they give are
timed again, and the peaks of every pass are kept (the largest), so shares
only shrink from the second pass on and the passes stop once a pass finds no
larger peak (:data:`PASSES` at most). Each pass is a sweep over the sends'
intervals sorted per resource, with a sparse table for the range maxima:
O(S log S) array work for S send intervals.

>>> import numpy as np
>>> sh = Shares(np.array([0, 1]), np.array([0, 0]), np.array([50.0]), np.array([1.0, 1.0]),
...             np.full(2, np.inf), 1000.0)
>>> sh.rates(sh.static).tolist()          # one NIC, two connections: half each
[25000.0, 25000.0]
>>> apart = sh.peaks(np.array([0, 1]), np.array([0.0, 10.0]), np.array([10.0, 20.0]))
>>> sh.rates(apart).tolist()              # used one after the other: the whole NIC each
[50000.0, 50000.0]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from msccl_py.errors import SimulationError
from msccl_py.plan.tables import (B_CHAN, B_RANK, C_CHAN, C_RECEIVER, C_SENDER, IS_SEND, S_COUNT,
                                  S_OP, S_SEND_CONN, Plan)
from msccl_py.simulate.machine import Machine

#: passes at most (the first at whole-call shares)
PASSES = 4


@dataclass
class Shares:
    """Which connection crosses which resource (as pairs), and what else limits it."""

    conn: np.ndarray     # per pair: connection
    res: np.ndarray      # per pair: resource (the machine's, then one budget per GPU)
    bw: np.ndarray       # per resource: GB/s
    load: np.ndarray     # per connection: chunk counts sent per iteration
    cap: np.ndarray      # per connection: GB/s besides the shares (threadblock limit; inf)
    idle: float          # GB/s of a connection that sends nothing (the memory rate)

    def __post_init__(self) -> None:
        keep = self.load[self.conn] > 0
        self.conn, self.res = self.conn[keep], self.res[keep]
        #: per pair: the whole-call denominator (every connection on the resource)
        self.static = np.bincount(self.res, weights=self.load[self.conn],
                                  minlength=len(self.bw))[self.res]

    def rates(self, denom: np.ndarray) -> np.ndarray:
        """Per connection: bytes/µs with each pair's share ``load / denom``."""
        rate = self.cap.copy()
        np.minimum.at(rate, self.conn, self.bw[self.res] * self.load[self.conn] / denom)
        rate[~np.isfinite(rate)] = self.idle
        return rate * 1e3

    def shared(self) -> bool:
        """Whether any resource carries more than one connection (else nothing to refine)."""
        return bool(np.any(self.static > self.load[self.conn] * (1 + 1e-12)))

    def peaks(self, seg_conn: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
        """Per pair: the largest total load on its resource while its connection sends, over
        the send intervals ``[start, end)`` of connections ``seg_conn`` (pairs whose
        connection sends in none of them keep the whole-call denominator)."""
        own = self.load[self.conn]
        out = np.maximum(own, 0.0)
        keep = end > start
        seg_conn, start, end = seg_conn[keep], start[keep], end[keep]
        order = np.argsort(self.conn, kind="stable")
        first = np.searchsorted(self.conn[order], np.arange(len(self.load) + 1))
        cnt = first[seg_conn + 1] - first[seg_conn]
        total = int(cnt.sum())
        if not total:
            return self.static.copy()
        seg = np.repeat(np.arange(len(seg_conn)), cnt)
        pair = order[np.repeat(first[seg_conn] - np.cumsum(cnt) + cnt, cnt) + np.arange(total)]
        res, load = self.res[pair], self.load[self.conn[pair]]
        # events per resource in time order, ends before starts at one instant (half-open)
        t = np.concatenate([start[seg], end[seg]])
        kind = np.repeat([1, 0], total)
        ev = np.lexsort((kind, t, np.concatenate([res, res])))
        level = np.cumsum(np.concatenate([load, -load])[ev])   # each resource's sum ends at 0
        pos = np.empty(2 * total, dtype=np.int64)
        pos[ev] = np.arange(2 * total)
        peak = _range_max(level, pos[:total], pos[total:])
        np.maximum.at(out, pair, peak)
        sent = np.zeros(len(self.load), dtype=bool)
        sent[seg_conn] = True
        # a connection whose own sends overlap counts once in the whole-call denominator
        return np.where(sent[self.conn], np.minimum(out, self.static), self.static)


def _range_max(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """max(values[lo:hi]) per query (lo < hi), a sparse table built one level at a time."""
    out = np.empty(len(lo))
    width = hi - lo
    level = np.floor(np.log2(np.maximum(width, 1))).astype(np.int64)
    table = values
    for k in range(int(level.max(initial=0)) + 1):
        if k:
            half = 1 << (k - 1)
            table = np.maximum(table[:-half], table[half:])
        q = level == k
        out[q] = np.maximum(table[lo[q]], table[hi[q] - (1 << k)])
    return out


@dataclass
class Wiring:
    """Per-connection paths and rates on one machine (independent of size)."""

    alpha: np.ndarray       # per connection: path α + protocol and generation hop latency (µs)
    rate: np.ndarray        # per connection, shared: bytes/µs (1e3 x GB/s)
    peak: np.ndarray        # per connection, alone on its path: bytes/µs
    conn_res: list[tuple[int, ...]]
    share_bytes: np.ndarray  # per resource: chunk-counts per iteration carried
    shares: Shares           # who shares what, for the shares among busy connections


def wiring(plan: Plan, machine: Machine, protocol: str) -> Wiring:
    """Paths, α and fair-share rates of every connection of ``plan`` on ``machine``."""
    machine.protocol(protocol)          # an unknown protocol is refused here
    steps = plan.steps
    nconn = len(plan.conns)
    sends = IS_SEND[steps[:, S_OP]] & (steps[:, S_SEND_CONN] >= 0) if plan.nsteps else []
    load = np.bincount(steps[sends, S_SEND_CONN], weights=steps[sends, S_COUNT],
                       minlength=nconn) if plan.nsteps else np.zeros(nconn)
    if plan.ngpus > machine.ngpus:
        raise SimulationError(f"the algorithm has {plan.ngpus} ranks but machine "
                              f"'{machine.name}' has {machine.ngpus} GPUs (use --nodes)")
    conn_res = []
    alpha = np.zeros(nconn)
    peak = np.zeros(nconn)
    for c in range(nconn):
        p = machine.path(int(plan.conns[c, C_SENDER]), int(plan.conns[c, C_RECEIVER]))
        conn_res.append(p.resources)
        alpha[c] = machine.hop_alpha_us(p, protocol)
        peak[c] = p.bw_GBps
    res_load = np.zeros(len(machine.resources))
    for c, res in enumerate(conn_res):
        for r in res:
            res_load[r] += load[c]
    pair_conn = np.repeat(np.arange(nconn), [len(r) for r in conn_res])
    pair_res = np.array([r for res in conn_res for r in res], dtype=np.int64)
    bw = np.array([r.bw_GBps for r in machine.resources] + [0.0] * plan.ngpus)
    cap = np.full(nconn, np.inf)
    tb = machine.threadblock_limit(protocol)
    if tb is not None:
        if machine.channel_threadblocks and plan.nblocks:
            tb = tb / _channel_sharers(plan)
        cap = np.minimum(cap, tb)
        peak = np.minimum(peak, tb)
    gpu = machine.gpu_limit(protocol)
    if gpu is not None and nconn:
        # one GPU's protocol total, a resource of its own shared by its connections;
        # Simple's and LL128's totals are NCCL's NVLink budget, so sends through a NIC
        # (another machine) are not in them, while LL's llMaxBws counts every send
        sender = plan.conns[:, C_SENDER]
        counted = np.ones(nconn, dtype=bool) if protocol == "LL" else \
            machine.same_machine(sender, plan.conns[:, C_RECEIVER])
        bw[len(machine.resources):] = gpu
        pair_conn = np.concatenate([pair_conn, np.nonzero(counted)[0]])
        pair_res = np.concatenate([pair_res, len(machine.resources) + sender[counted]])
        peak = np.where(counted, np.minimum(peak, gpu), peak)
    shares = Shares(pair_conn, pair_res, bw, load, cap, machine.memory_bw)
    return Wiring(alpha, shares.rates(shares.static), peak * 1e3, conn_res, res_load, shares)


def _channel_sharers(plan: Plan) -> np.ndarray:
    """Per connection: the threadblocks of its sender on its channel (NCCL runs them as one
    CTA, so they share its limit)."""
    blocks = plan.blocks
    key = blocks[:, B_RANK] * (int(blocks[:, B_CHAN].max()) + 2) + blocks[:, B_CHAN] + 1
    uniq, counts = np.unique(key, return_counts=True)
    ckey = plan.conns[:, C_SENDER] * (int(blocks[:, B_CHAN].max()) + 2) + plan.conns[:, C_CHAN] + 1
    pos = np.searchsorted(uniq, ckey)
    ok = (pos < len(uniq)) & (uniq[np.minimum(pos, len(uniq) - 1)] == ckey)
    return np.where(ok, counts[np.minimum(pos, len(uniq) - 1)], 1).astype(float)
