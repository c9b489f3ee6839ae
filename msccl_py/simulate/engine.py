"""The timing engine: a max-plus pass over the plan's steps, one pipeline iteration at a time.

Per step and iteration it computes a start and an end time (µs):

* ``start`` waits for the previous step of its threadblock (the block's last
  step of the previous iteration for the first step), every step it depends
  on (same iteration), and for a receive the *head* of the matching send:
  the first FIFO slot's arrival (sender start + slot time + α). NCCL forwards
  slot by slot, so a ``rcs`` starts forwarding before the whole step arrived.
* ``end = start + duration``, and a receive ends no earlier than the *tail* of
  the matching send (sender end + α) plus one slot of its own work.
* A send's duration is its wire bytes (data / protocol efficiency) over the
  connection's rate. The rate is the threadblock limit or, on each resource
  the connection uses, the resource's bandwidth split among the connections
  busy with it, in proportion to their bytes (:mod:`~msccl_py.simulate.sharing`:
  a pass at the shares over the whole call tells who is busy when, and the
  call is timed again at the shares that gives, so no resource ever carries
  more than its bandwidth); ``copy``/``reduce`` run at the memory rate.

Steps are grouped by level (longest path from a source in the per-iteration
DAG of block order, dependencies and send→receive matches) and each level is
one vectorised NumPy update, so a pass costs O(steps) array work in O(levels)
Python calls. Iterations repeat the same DAG, and the pass is max-plus linear in the
previous iteration's end times: once every step's end time has moved by the same
amount over the last ``c`` iterations (``c`` <= :data:`MAX_CYCLE`), every later
iteration repeats that shift exactly, and the rest is extrapolated, so the cost of
one size does not grow with the message size. (Equal periods of the call's end
alone are not enough: a long pipeline can hold one period for a few iterations
while a slower chain is still filling.) A pipeline that has not settled after
:data:`STEADY_ITERATIONS` is extrapolated at its largest recent period, and never
below its busiest resource's bytes / bandwidth.

FIFO back-pressure: a connection's FIFO holds ``fifo_transfers`` transfers
(``plan.geometry``: 2 for Simple, 8 for LL/LL128), so a send waits until the
receiver has consumed the transfer that many places earlier, in the same or
the previous iteration. Where those waits close a cycle at some size (the
verifier's deadlock question) the same-iteration waits the level order
cannot honour are dropped.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from msccl_py.errors import SimulationError
from msccl_py.plan.geometry import geometry
from msccl_py.plan.tables import (
    B_NSTEPS,
    B_RANK,
    B_STEP_BEGIN,
    B_TB,
    D_STEP,
    IS_RECV,
    IS_SEND,
    S_BLOCK,
    S_COUNT,
    S_NDEPS,
    S_OP,
    S_RECV_PEER_STEP,
    S_SEND_CONN,
    S_SEND_PEER_STEP,
    S_SEND_SEQ,
    Plan,
)
from msccl_py.simulate.machine import Machine
from msccl_py.simulate.sharing import PASSES, Shares, Wiring, wiring

#: simulated iterations after which an unsettled pipeline's period is extrapolated
STEADY_ITERATIONS = 48
#: longest cycle (in iterations) of a settled pipeline that is recognised
MAX_CYCLE = 4
#: most step intervals the sharing pass adds for the iterations an extrapolation implies
#: (beyond it the whole-call shares stand: a pass over them would cost more than the call)
WINDOW_STEPS = 4_000_000


class SimCache:
    """What the engine derives from a plan and keeps for later calls: level structures,
    FIFO structures per size class, wiring per machine, hop-chain bounds.

    Entries are held per plan object, under tuple keys, and dropped when the plan is
    collected (a plan's tables never change once built).
    """

    def __init__(self) -> None:
        self._plans: dict[int, dict] = {}

    def get(self, plan: Plan, key: Hashable, build: Callable[[], Any]) -> Any:
        """The entry ``key`` of ``plan``, built by ``build()`` the first time."""
        store = self._plans.get(id(plan))
        if store is None:
            store = self._plans[id(plan)] = {}
            weakref.finalize(plan, self._plans.pop, id(plan), None)
        if key not in store:
            store[key] = build()
        return store[key]

    def __len__(self) -> int:
        return len(self._plans)


#: the engine's caches (see :class:`SimCache`)
CACHE = SimCache()


@dataclass
class Structure:
    """What a plan's DAG looks like, independent of size and machine."""

    levels: list[np.ndarray]
    prev: np.ndarray          # previous step row in the block, -1 for the first
    recv_peer: np.ndarray     # matching send row of a receive, -1 otherwise
    dep_rows: list[tuple[np.ndarray, np.ndarray]]   # per level: (local position, dep row)
    hops: np.ndarray          # send→receive hops on the longest chain ending at each step
    last_of_block: np.ndarray  # last step row of each block (-1 when empty)
    level_of: np.ndarray      # level index of each step


def structure(plan: Plan, fifo: tuple[np.ndarray, np.ndarray] | None = None,
              key: object = None) -> Structure | None:
    """Levels of ``plan``'s per-iteration DAG (block order, dependencies, send→receive).

    ``fifo`` adds edges ``(from rows, to rows)``: a send waiting for a receive to
    free its FIFO slot; with them a cycle returns None (the caller times the
    plan without those waits). Without them a cycle is a :class:`SimulationError`
    naming a step on it (the plan deadlocks even with unbounded FIFOs).
    Kept in :data:`CACHE` for ``plan`` under ``key``.
    """
    return CACHE.get(plan, ("structure", key), lambda: _structure(plan, fifo))


def _structure(plan: Plan, fifo) -> Structure | None:
    n = plan.nsteps
    steps = plan.steps
    blocks = plan.blocks
    prev = np.arange(-1, n - 1, dtype=np.int64)
    first = blocks[:, B_STEP_BEGIN][blocks[:, B_NSTEPS] > 0]
    prev[first] = -1
    is_recv = IS_RECV[steps[:, S_OP]] if n else np.zeros(0, bool)
    recv_peer = np.where(is_recv, steps[:, S_RECV_PEER_STEP], -1)
    dep_src = plan.deps[:, D_STEP] if len(plan.deps) else np.zeros(0, np.int64)
    dep_owner = np.repeat(np.arange(n), steps[:, S_NDEPS]) if n else np.zeros(0, np.int64)
    # deps rows are grouped by step in order, so dep_owner matches plan.deps row order
    ok = dep_src >= 0
    dep_src, dep_owner = dep_src[ok], dep_owner[ok]
    extra_from, extra_to = fifo if fifo is not None else (np.zeros(0, np.int64),) * 2
    # successor lists (CSR by predecessor) for Kahn's algorithm
    succ_from = np.concatenate([prev[prev >= 0], recv_peer[recv_peer >= 0], dep_src,
                                extra_from])
    succ_to = np.concatenate([np.nonzero(prev >= 0)[0], np.nonzero(recv_peer >= 0)[0],
                              dep_owner, extra_to])
    is_hop = np.concatenate([np.zeros(int((prev >= 0).sum()), np.int64),
                             np.ones(int((recv_peer >= 0).sum()), np.int64),
                             np.zeros(len(dep_src) + len(extra_from), np.int64)])
    order = np.argsort(succ_from, kind="stable")
    succ_from, succ_to, is_hop = succ_from[order], succ_to[order], is_hop[order]
    starts = np.searchsorted(succ_from, np.arange(n + 1))
    remaining = np.bincount(succ_to, minlength=n)
    hops = np.zeros(n, dtype=np.int64)
    frontier = np.nonzero(remaining == 0)[0]
    levels: list[np.ndarray] = []
    seen = 0
    while len(frontier):
        levels.append(frontier)
        seen += len(frontier)
        lo, hi = starts[frontier], starts[frontier + 1]
        cnt = hi - lo
        total = int(cnt.sum())
        if total == 0:
            break
        idx = np.repeat(lo - np.cumsum(cnt) + cnt, cnt) + np.arange(total)
        tgt = succ_to[idx]
        np.maximum.at(hops, tgt, hops[succ_from[idx]] + is_hop[idx])
        np.subtract.at(remaining, tgt, 1)
        cand = np.unique(tgt)
        frontier = cand[remaining[cand] == 0]
    if seen < n:
        if fifo is not None:
            return None
        stuck = int(np.nonzero(remaining > 0)[0][0])
        raise SimulationError(f"{plan.describe_step(stuck)} can never run: the steps wait on "
                              f"each other in a cycle even with unbounded FIFOs (verify the "
                              f"algorithm: `msccl-py verify`)")
    level_of = np.zeros(n, dtype=np.int64)
    pos_in_level = np.zeros(n, dtype=np.int64)
    for k, lv in enumerate(levels):
        level_of[lv] = k
        pos_in_level[lv] = np.arange(len(lv))
    by_level = np.argsort(level_of[dep_owner], kind="stable")
    owner_sorted, src_sorted = dep_owner[by_level], dep_src[by_level]
    bounds = np.searchsorted(level_of[owner_sorted], np.arange(len(levels) + 1))
    dep_rows = [(pos_in_level[owner_sorted[bounds[k]:bounds[k + 1]]],
                 src_sorted[bounds[k]:bounds[k + 1]]) for k in range(len(levels))]
    nb = blocks[:, B_NSTEPS]
    last = np.where(nb > 0, blocks[:, B_STEP_BEGIN] + nb - 1, -1)
    return Structure(levels, prev, recv_peer, dep_rows, hops, last, level_of)


@dataclass
class Timing:
    """One size's outcome: total time (µs, without the per-call base) and what bounds it."""

    time_us: float
    iterations: int
    period_us: float
    resource_bound_us: float
    resource: str | None
    block_busy_us: float
    block: int
    hops: int
    starts: list[np.ndarray]  # per simulated iteration: start of every step (µs)
    ends: list[np.ndarray]
    latency_us: float = 0.0   # the hop chain: one iteration of hop α and first granules
    latency_bounds: tuple[float, float] = (0.0, 0.0)   # where asked for: see chain_bounds
    rate: np.ndarray | None = None   # per connection: the bytes/µs its sends ran at


def fifo_waits(plan: Plan, transfers: np.ndarray,
               capacity: int) -> tuple[np.ndarray, np.ndarray]:
    """Per send step: the receive whose end frees the FIFO slot it needs (-1: none), and
    whether that receive is in the same iteration (else the previous one).

    A connection's FIFO holds ``capacity`` transfers: the send of transfer ``j``
    waits until the receiver consumed transfer ``j - capacity``.
    """
    steps = plan.steps
    n = plan.nsteps
    row = np.full(n, -1, dtype=np.int64)
    same = np.zeros(n, dtype=bool)
    sconn = steps[:, S_SEND_CONN]
    sends = np.nonzero(IS_SEND[steps[:, S_OP]] & (sconn >= 0))[0]
    if not len(sends):
        return row, same
    order = sends[np.lexsort((steps[sends, S_SEND_SEQ], sconn[sends]))]
    conn = sconn[order]
    t = transfers[order]
    incl = np.cumsum(t)
    excl = incl - t
    base = excl[np.searchsorted(conn, conn, side="left")]
    per_iter = incl[np.searchsorted(conn, conn, side="right") - 1] - base
    want = excl - base - capacity                          # transfer that must be consumed
    prev_iter = want < 0
    want = np.where(prev_iter, want + per_iter, want)
    pos = np.minimum(np.searchsorted(incl, base + want, side="right"), len(order) - 1)
    recv = steps[order[pos], S_SEND_PEER_STEP]
    ok = (want >= 0) & (recv >= 0)
    row[order[ok]] = recv[ok]
    same[order[ok]] = ~prev_iter[ok]
    return row, same


def _timed_structure(plan: Plan, transfers: np.ndarray, mac: int,
                     g) -> tuple[Structure, np.ndarray, np.ndarray]:
    """The structure with this size's FIFO waits, and the waits it can honour."""
    key = ("fifo", g.protocol, mac)
    return CACHE.get(plan, ("timed", key), lambda: _timed(plan, transfers, key, g))


def _timed(plan: Plan, transfers: np.ndarray, key, g) -> tuple[Structure, np.ndarray, np.ndarray]:
    row, same = fifo_waits(plan, transfers, g.fifo_transfers)
    inner = np.nonzero((row >= 0) & same)[0]
    st = structure(plan, (row[inner], inner), key) if len(inner) else None
    if st is None:
        # the waits close a cycle at this size (the verifier's deadlock question):
        # time the plan without the same-iteration ones the level order cannot honour
        st = structure(plan)
        late = same & (row >= 0) & (st.level_of[np.maximum(row, 0)] >= st.level_of)
        row = np.where(late, -1, row)
    return st, row, same


def _iterate(plan: Plan, st: Structure, fifo_row: np.ndarray, fifo_same: np.ndarray,
             dur: np.ndarray, piece: np.ndarray, alpha: np.ndarray, iters: int,
             extrapolate: bool) -> tuple[float, float, list, list]:
    """(total, period, starts, ends): the level-by-level max-plus pass over the iterations,
    extrapolated from the steady period (see the module docstring)."""
    n = plan.nsteps
    block = plan.steps[:, S_BLOCK]
    prev_end = np.full(n, -np.inf)
    head = np.zeros(n)
    tail = np.zeros(n)
    start = np.zeros(n)
    end = np.zeros(n)
    ready = np.zeros(plan.nblocks)
    recv_peer = st.recv_peer
    prev = st.prev
    it_end = []
    starts, ends = [], []
    sim_iters = min(iters, STEADY_ITERATIONS) if extrapolate else iters
    cycle = 0
    for it in range(sim_iters):
        if it:
            prev_end = end.copy()
        for lv, (dpos, dsrc) in zip(st.levels, st.dep_rows):
            p = prev[lv]
            s = np.where(p >= 0, end[np.maximum(p, 0)], ready[block[lv]])
            if len(dpos):
                np.maximum.at(s, dpos, end[dsrc])
            f = fifo_row[lv]
            fi = np.maximum(f, 0)
            s = np.where(f >= 0, np.maximum(s, np.where(fifo_same[lv], end[fi], prev_end[fi])), s)
            rp = recv_peer[lv]
            has = rp >= 0
            rpi = np.maximum(rp, 0)
            s = np.where(has, np.maximum(s, head[rpi]), s)
            e = s + dur[lv]
            e = np.where(has, np.maximum(e, tail[rpi] + piece[lv]), e)
            start[lv] = s
            end[lv] = e
            head[lv] = s + piece[lv] + alpha[lv]
            tail[lv] = e + alpha[lv]
        has_steps = st.last_of_block >= 0
        ready[has_steps] = end[st.last_of_block[has_steps]]
        it_end.append(float(end.max()) if n else 0.0)
        starts.append(start.copy())
        ends.append(end.copy())
        if extrapolate and it + 1 < iters:
            cycle = _settled(ends)
            if cycle:
                break
    done = len(it_end)
    if cycle:
        # each step of iteration j >= done - cycle ends (j - j') / cycle shifts after j', the
        # iteration of the last cycle in the same phase, the shift being its own over the
        # cycle before
        last = iters - 1
        phase = done - cycle + (last - (done - cycle)) % cycle
        shift = (ends[phase] - ends[phase - cycle] if phase >= cycle  # else one shift for all
                 else it_end[-1] - it_end[-1 - cycle])
        total = float((ends[phase] + (last - phase) // cycle * shift).max())
        period = (total - it_end[-1]) / (iters - done)
    else:
        period = it_end[-1] - it_end[-2] if done > 1 else it_end[-1]
        if done < iters and done > 2:
            # not settled: the largest recent period (a filling chain only slows it)
            w = max(1, (done - 1) // 2)
            period = max(period, (it_end[-1] - it_end[-1 - w]) / w)
        total = it_end[-1] + (iters - done) * period
    return total, period, starts, ends


def _settled(ends: list[np.ndarray]) -> int:
    """The cycle ``c`` (in iterations) once the pipeline repeats itself, else 0: every step's
    end moved by one amount over the last ``c`` iterations (the pass then repeats that
    shift exactly), or each step's end moved by its own amount over each of the last two
    ``c``-iteration windows (blocks that wait on nobody, such as local copies, run ahead
    at their own pace and never share the others' shift)."""
    last = ends[-1]
    if not len(last):
        return 1
    tol = 1e-9 * max(1.0, float(np.abs(last).max()))
    for c in range(1, min(MAX_CYCLE, len(ends) - 1) + 1):
        d = last - ends[-1 - c]
        if float(d.max() - d.min()) <= tol:
            return c
        if len(ends) > 2 * c and float(np.abs(d - (ends[-1 - c] - ends[-1 - 2 * c])).max()) \
                <= tol:
            return c
    return 0


class _Inputs(NamedTuple):
    """One size's per-step inputs to the max-plus pass."""

    st: Structure
    fifo_row: np.ndarray
    fifo_same: np.ndarray
    dur: np.ndarray
    piece: np.ndarray
    alpha: np.ndarray
    unit: np.ndarray        # per send: wire bytes per byte of slice / the path's own rate
    granule: np.ndarray     # per send: the largest first granule / the path's own rate
    iters: int
    slice_bytes: float
    mac: int


def _inputs(plan: Plan, machine: Machine, nbytes: float, protocol: str) -> _Inputs:
    w = CACHE.get(plan, ("wiring", machine.key, protocol),
                  lambda: wiring(plan, machine, protocol))
    proto = machine.protocol(protocol)
    g = geometry(protocol)
    steps = plan.steps
    chunk = nbytes / max(1, plan.nchunksperloop)
    iters = max(1, int(np.ceil(chunk / g.iter_bytes)))
    slice_bytes = chunk / iters
    ops = steps[:, S_OP]
    data = steps[:, S_COUNT] * slice_bytes
    sconn = steps[:, S_SEND_CONN]
    sends = IS_SEND[ops] & (sconn >= 0)
    mem = machine.memory_bw * 1e3      # local copy/reduce: HBM, not the wire's threadblock limit
    dur = np.where(IS_RECV[ops] & ~IS_SEND[ops], 0.0, data / mem)
    conn = np.where(sends, sconn, 0)
    wire = data / proto.efficiency
    dur = np.where(sends, wire / w.rate[conn], dur)
    # the first granule runs ahead at the path's own speed: a chain of hops is latency
    granule = proto.granule_bytes or g.slot_bytes
    peak = w.peak[conn]
    piece = np.where(sends, np.minimum(wire, granule) / peak, 0.0)
    alpha = np.where(sends, w.alpha[conn], 0.0)
    mac = g.max_allowed_count(nbytes, max(1, plan.nchunksperloop))
    transfers = np.maximum(1, -(-steps[:, S_COUNT] // mac))
    mac = min(mac, plan.max_count)
    st, fifo_row, fifo_same = _timed_structure(plan, transfers, mac, g)
    unit = np.where(sends, steps[:, S_COUNT] / proto.efficiency / peak, 0.0)
    return _Inputs(st, fifo_row, fifo_same, dur, piece, alpha, unit,
                   np.where(sends, granule / peak, 0.0), iters, slice_bytes, mac)


def run(plan: Plan, machine: Machine, nbytes: float, protocol: str | None = None,
        extrapolate: bool = True, chain: bool = True, bounds: bool = False) -> Timing:
    """Time one call of ``nbytes`` (nccl-tests' size) of ``plan`` on ``machine``.

    ``extrapolate=False`` simulates every iteration (the reference the
    steady-state extrapolation is tested against); ``chain=False`` skips the hop
    chain (``latency_us`` 0), which only the bottleneck label needs; ``bounds``
    fills ``latency_bounds`` from :func:`chain_bounds` instead, which mostly costs
    no pass.
    """
    protocol = protocol or plan.protocol
    x = _inputs(plan, machine, nbytes, protocol)
    n = plan.nsteps
    block = plan.steps[:, S_BLOCK]
    total, period, starts, ends = _iterate(plan, x.st, x.fifo_row, x.fifo_same, x.dur,
                                           x.piece, x.alpha, x.iters, extrapolate)
    w = CACHE.get(plan, ("wiring", machine.key, protocol),
                  lambda: wiring(plan, machine, protocol))
    rate = w.rate
    if n and w.shares.shared():
        x, (total, period, starts, ends), rate = _busy_shares(
            plan, machine, protocol, w, x, (total, period, starts, ends), extrapolate)
    hop_chain = _chain(plan, x, x.piece, x.alpha) if n and chain else 0.0
    # bounds, for attributing the time
    res_bytes = w.share_bytes * x.slice_bytes * x.iters / machine.protocol(protocol).efficiency
    bw = np.array([r.bw_GBps for r in machine.resources]) * 1e3
    if len(res_bytes):
        rb = res_bytes / bw[:len(res_bytes)]
        k = int(np.argmax(rb))
        res_bound, res_name = float(rb[k]), machine.resources[k].name
    else:
        res_bound, res_name = 0.0, None
    busy = np.bincount(block, weights=x.dur, minlength=plan.nblocks) * x.iters if n else \
        np.zeros(plan.nblocks)
    b = int(np.argmax(busy)) if len(busy) else 0
    return Timing(total, x.iters, period, res_bound, res_name,
                  float(busy[b]) if len(busy) else 0.0, b,
                  int(x.st.hops.max()) if n else 0, starts, ends, hop_chain,
                  _bounds(plan, machine, protocol, x) if bounds and n else (0.0, 0.0), rate)


def _busy_shares(plan: Plan, machine: Machine, protocol: str, w: Wiring, x: _Inputs,
                 timed: tuple, extrapolate: bool) -> tuple[_Inputs, tuple, np.ndarray]:
    """Inputs and pass with each resource shared among the connections busy at once
    (:mod:`~msccl_py.simulate.sharing`): the peaks of every pass kept, until a pass finds
    none larger; the whole-call shares' pass where :data:`PASSES` do not settle it, or where
    the pipeline was extrapolated before it repeated itself (later iterations may overlap
    more than the simulated ones showed)."""
    sconn = plan.steps[:, S_SEND_CONN]
    sends = IS_SEND[plan.steps[:, S_OP]] & (sconn >= 0)
    conn = np.where(sends, sconn, 0)
    seg_conn, seg_row = CACHE.get(plan, ("sends", machine.key, protocol),
                                  lambda: _sends(plan, w.shares))
    denom = np.zeros(len(w.shares.conn))
    now, rate, first = x, w.rate, (x, timed, w.rate)
    for _ in range(PASSES):
        window = _extrapolated(timed[2], timed[3], now.iters)
        if window is None:
            return first
        starts, ends = window
        peak = w.shares.peaks(np.tile(seg_conn, len(starts)),
                              np.concatenate([a[seg_row] for a in starts]),
                              np.concatenate([a[seg_row] for a in ends]))
        if np.all(peak <= denom):
            return now, timed, rate
        denom = np.maximum(denom, peak)
        new = w.shares.rates(denom)
        now = now._replace(dur=np.where(sends, now.dur * rate[conn] / new[conn], now.dur))
        rate = new
        timed = _iterate(plan, now.st, now.fifo_row, now.fifo_same, now.dur, now.piece,
                         now.alpha, now.iters, extrapolate)
    return first


def _extrapolated(starts: list[np.ndarray], ends: list[np.ndarray], iters: int,
                  most: int = 2 * STEADY_ITERATIONS) -> tuple[list, list] | None:
    """The simulated iterations' step intervals and the later ones the extrapolation implies,
    as far as any of them can still overlap the last simulated one: a pipeline settled after
    two iterations overlaps its third and later iterations in the sends a share must count.
    None where the pipeline did not settle (its later iterations are a guess) or that takes
    more than ``most`` further iterations: the caller then keeps the whole-call shares,
    which hold at any overlap."""
    done = len(starts)
    if done >= iters or done < 2:
        return starts, ends
    c = _settled(ends)
    if not c:
        return None      # extrapolated at a guessed period: its overlaps are not known
    shift = ends[-1] - ends[-1 - c]          # per step, over one cycle
    moving = shift[shift > 0]
    if not len(moving):
        return starts, ends
    reach = float(ends[-1].max() - starts[-1].min())
    more = min(iters - done, c * (int(reach / float(moving.min())) + 2))
    if more > most or more * len(starts[-1]) > WINDOW_STEPS:
        return None
    starts, ends = list(starts), list(ends)
    for j in range(done, done + more):
        starts.append(starts[j - c] + shift)
        ends.append(ends[j - c] + shift)
    return starts, ends


def _sends(plan: Plan, shares: Shares) -> tuple[np.ndarray, np.ndarray]:
    """(connection, step row) of every send of ``plan``; a symmetry quotient gives those of
    the whole plan whose connections share a resource with its own, as rows of their
    representatives' images (``("whole sends",)`` in its cache entry)."""
    sconn = plan.steps[:, S_SEND_CONN]
    own = np.nonzero(IS_SEND[plan.steps[:, S_OP]] & (sconn >= 0))[0]
    whole = CACHE.get(plan, ("whole sends",), lambda: None)
    if whole is None:
        return sconn[own], own
    conn, row = whole
    used = np.zeros(len(shares.bw), dtype=bool)
    mine = np.zeros(len(shares.load), dtype=bool)
    mine[sconn[own]] = True
    used[shares.res[mine[shares.conn]]] = True
    near = np.zeros(len(shares.load), dtype=bool)
    near[shares.conn[used[shares.res]]] = True
    keep = near[conn]
    return conn[keep], row[keep]


def _chain(plan: Plan, x: _Inputs, piece: np.ndarray, alpha: np.ndarray) -> float:
    """The hop chain: one iteration in which each hop costs only its α and the first
    granule it must receive before forwarding (a chain of store-and-forward hops)."""
    return _iterate(plan, x.st, x.fifo_row, x.fifo_same, np.zeros(plan.nsteps), piece, alpha,
                    1, True)[0]


def hop_chain(plan: Plan, machine: Machine, nbytes: float, protocol: str | None = None) -> float:
    """The hop chain (µs) of one call: what :func:`run` puts in ``latency_us``."""
    if not plan.nsteps:
        return 0.0
    x = _inputs(plan, machine, nbytes, protocol or plan.protocol)
    return _chain(plan, x, x.piece, x.alpha)


def chain_bounds(plan: Plan, machine: Machine, nbytes: float,
                 protocol: str | None = None) -> tuple[float, float]:
    """(lower, upper) bound on the hop chain of one call, mostly without a pass of its own.

    The chain is a longest path whose weights are each hop's α and first granule, so it
    lies between the α-only chain and that plus the granule-only chain. A granule is at
    most its slice's wire bytes (exactly that while no slice exceeds a granule) and at
    most a whole granule, so the granule-only chain is at most the smaller of the
    per-byte chain times the slice and the whole-granule chain. Where one path is longest
    for α and per byte alike (a pass with both weights reaches their sum), the chain of a
    size whose slices fit a granule is exactly that sum. These chains do not depend on
    the size, only on the FIFO structure: they are computed once per plan, machine,
    protocol and structure.
    """
    protocol = protocol or plan.protocol
    if not plan.nsteps:
        return 0.0, 0.0
    return _bounds(plan, machine, protocol, _inputs(plan, machine, nbytes, protocol))


def _bounds(plan: Plan, machine: Machine, protocol: str, x: _Inputs) -> tuple[float, float]:
    lo, per_byte, whole, joint = CACHE.get(plan, ("chain", machine.key, protocol, x.mac),
                                           lambda: _chain_parts(plan, x))
    hi = lo + min(per_byte * x.slice_bytes, whole)
    fits = bool(np.all(x.piece >= x.slice_bytes * x.unit * (1 - 1e-9)))
    return (hi, hi) if joint and fits else (lo, hi)


def _chain_parts(plan: Plan, x: _Inputs) -> tuple[float, float, float, bool]:
    """α-only, per-byte and whole-granule chains, and whether one path is longest for α
    and per byte at once (a longest path's weight is at most the sum of the two maxima,
    with equality only for such a path)."""
    zero = np.zeros(plan.nsteps)
    lo, per_byte = _chain(plan, x, zero, x.alpha), _chain(plan, x, x.unit, zero)
    whole = _chain(plan, x, x.granule, zero)
    scale = lo / per_byte if per_byte > 0 else 1.0
    both = _chain(plan, x, x.unit * scale, x.alpha)
    return lo, per_byte, whole, per_byte > 0 and both >= 2 * lo * (1 - 1e-9)


def describe_block(plan: Plan, block: int) -> str:
    """``rank R tb T`` of a block index."""
    return f"rank {plan.blocks[block, B_RANK]} tb {plan.blocks[block, B_TB]}"
