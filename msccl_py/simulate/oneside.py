"""Timing MSCCL++ execution plans: one-sided operations over the machine's links.

An MSCCL++ plan (:mod:`msccl_py.targets.mscclpp.ir`) runs once per call: every
threadblock runs its operations in order, and threadblocks meet only through
signal/wait pairs, barriers, semaphores and LL packet flags. The model times
each operation on the same :class:`~msccl_py.simulate.machine.Machine` as the
MSCCL engine:

* a **memory channel** ``put``/``pws``/``pwsf`` (and an LL ``ppkt``) is the
  threadblock writing its bytes over the path to the peer, ``get`` and the
  remote sources of ``rre``/``rres`` reading them back over the peer's path
  (LL packets: twice the bytes). An operation moves all its peers' bytes at
  once: it lasts as long as its slowest connection, or the threadblock's
  limit on all it sends (or receives);
* a **port channel** ``put`` hands the bytes to the proxy: the threadblock
  goes on, the bytes cross the path after the channel's earlier ones, and a
  ``signal``, ``pws`` or ``flush`` on that channel waits for them;
* ``copy``, ``re`` and unpacking run at the machine's memory rate; ``res``
  and the packet reduce-sends write their result to the peers as well;
* a ``wait`` ends when the k-th signal on its channel pair has crossed the
  path (its α), a packet read when the packets it reads have arrived, a
  barrier when its last threadblock arrives, a ``sem_acquire`` when the
  matching ``sem_release`` ran.

Rates are shared as in the MSCCL engine: each link, switch port and NIC
splits its bandwidth among the rank pairs that cross it in proportion to
their bytes, memory-channel transfers at most the protocol's threadblock
limit. MSCCL++ signals are single flag writes, so a hop costs its path's α
without NCCL's per-protocol latency; the call pays the protocol's fixed cost.
NVLink SHARP (switch channels: ``glres``, ``gstore``, ``gstorepkt``) is not
modelled and such plans are refused.

>>> from msccl_py import library
>>> from msccl_py.targets.mscclpp.emit import lower
>>> plan = lower(library.compile("allgather_ring", 8, use_cache=False))
>>> r = simulate_plan(plan, "dgx-h100", "1GiB")[0]
>>> r.bottleneck.startswith("threadblock rank")
True
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass

import numpy as np

from msccl_py.errors import SimulationError
from msccl_py.targets.mscclpp.memory import Step, expand
from msccl_py.targets.mscclpp.geometry import geometry, group_share
from msccl_py.targets.mscclpp.ir import Plan
from msccl_py.simulate.engine import Timing
from msccl_py.simulate.machine import Machine, machine_model
from msccl_py.simulate.results import Result, busbw_factor, parse_sizes

#: operations of NVLink SHARP (switch channels), which the model does not time
NVLS_OPS = ("glres", "gstore", "gstorepkt")
#: operations that read LL packets (wait for them), and the sources that are packets
PACKET_READS = {"rppkt": slice(0, 1), "upkt": slice(0, 1), "repkt": slice(1, None),
                "respkt": slice(1, None), "recpkt": slice(1, None), "recspkt": slice(1, None)}
#: operations that write LL packets
PACKET_WRITES = ("ppkt", "rppkt", "cpkt", "respkt", "recpkt", "recspkt")
SIGNALS = ("signal", "rlxsignal")
WAITS = ("wait", "rlxwait")


def simulate_plan(plan: Plan, machine, sizes) -> list[Result]:
    """Predicted :class:`~msccl_py.simulate.Result` per size of MSCCL++ ``plan`` on
    ``machine`` (a Machine, Topology, name or path)."""
    from msccl_py.simulate import bottleneck, check_ranks
    m = machine if isinstance(machine, Machine) else machine_model(machine)
    _refuse_nvls(plan)
    check_ranks(plan.nranks, m)
    proto = "LL" if plan.packets else "Simple"
    base = m.protocol(proto).base_us
    out = []
    for nbytes in parse_sizes(sizes):
        t, block = _timing(plan, m, nbytes, proto)
        time_us = t.time_us + base
        algbw = nbytes / (time_us * 1e3)
        out.append(Result(nbytes, time_us, algbw,
                          algbw * busbw_factor(plan.collective, plan.nranks),
                          bottleneck(None, t, base, block), proto, 1,
                          t.resource_bound_us / t.time_us if t.time_us else 0.0))
    return out


def _refuse_nvls(plan: Plan) -> None:
    for g in plan.gpus:
        for tb in g.threadblocks:
            for op in tb.ops:
                for o in [op] + op.ops:
                    if o.name in NVLS_OPS or o.channel_type == "switch":
                        raise SimulationError(
                            f"MSCCL++ plan {plan.name!r} uses NVLink SHARP ({o.name} at "
                            f"{o.path or f'rank {g.rank} tb {tb.id}'}); the performance model "
                            f"does not time NVLS")


@dataclass
class _Xfer:
    """Bytes one operation moves over one rank pair (src -> dst), and whether the
    threadblock moves them itself (memory channel) or hands them to the proxy (port)."""

    src: int
    dst: int
    nbytes: float
    proxy: bool


def _bytes(plan: Plan, st: Step, chunk: int, ref) -> float:
    total = ref.size * chunk
    if st.unit is not None:
        total = max(0, min(st.unit, total - st.offset))
    if st.op.tbg is not None:
        total = group_share(total, st.op.tbg[0], st.op.tbg[1], plan.buffer_alignment)[1]
    return float(total)


def _transfers(plan: Plan, rank: int, st: Step, chunk: int) -> tuple[list[_Xfer], float]:
    """Remote transfers of one operation and its local work in bytes (at the memory rate)."""
    op = st.op
    refs = op.src or op.dst
    size = _bytes(plan, st, chunk, refs[0]) if refs else 0.0
    proxy = op.channel_type == "port"
    wire = 2.0 if op.name in PACKET_WRITES else 1.0   # LL packets: 8 data bytes per 16
    xfers = [_Xfer(ref.rank, rank, size, proxy) for ref in op.src
             if ref.kind == "remote" and ref.rank not in (None, rank)]
    xfers += [_Xfer(rank, ref.rank, size * wire, proxy) for ref in op.dst
              if ref.kind == "remote" and ref.rank not in (None, rank)]
    local = 0.0 if op.name in ("put", "pws", "pwsf", "get", "ppkt", "rppkt") else size
    return xfers, local


class _Rates:
    """Per connection (sender, receiver, issuing threadblock): its share of every resource
    on the pair's path, in proportion to its bytes (bytes/µs); per pair: the path's α."""

    def __init__(self, m: Machine, load: dict, proto: str):
        res_load = defaultdict(float)
        paths = {conn[:2]: m.path(*conn[:2]) for conn in load}
        for conn, nbytes in load.items():
            for r in paths[conn[:2]].resources:
                res_load[r] += nbytes
        tb = m.threadblock_limit(proto)
        self.alpha = {pair: p.alpha_us for pair, p in paths.items()}
        self.rate, self.tb = {}, (tb or np.inf) * 1e3
        for conn, nbytes in load.items():
            share = min((m.resources[r].bw_GBps * nbytes / res_load[r]
                         for r in paths[conn[:2]].resources), default=np.inf)
            self.rate[conn] = share * 1e3
        self.res_load = res_load

    def alpha_of(self, m: Machine, pair) -> float:
        if pair not in self.alpha:
            self.alpha[pair] = m.path(*pair).alpha_us
        return self.alpha[pair]


def _timing(plan: Plan, m: Machine, nbytes: int, proto: str) -> tuple[Timing, str]:
    chunk = geometry(plan, nbytes).chunk
    tbs = [(g.rank, tb) for g in plan.gpus for tb in g.threadblocks]
    steps = [expand(plan, chunk, tb.ops) for _, tb in tbs]
    work = [[_transfers(plan, rank, st, chunk) for st in ss] for (rank, _), ss in zip(tbs, steps)]
    load: dict = defaultdict(float)
    for g, ws in enumerate(work):
        for xfers, _ in ws:
            for x in xfers:
                load[(x.src, x.dst, g)] += x.nbytes
    rates = _Rates(m, load, proto)
    full = _schedule(plan, m, tbs, steps, work, rates, 1.0)
    chain = _schedule(plan, m, tbs, steps, work, rates, 0.0)
    g = int(np.argmax(full.busy)) if full.busy else 0
    bw = np.array([r.bw_GBps for r in m.resources]) * 1e3
    res_bound, res_name = 0.0, None
    if rates.res_load:
        k = max(rates.res_load, key=lambda r: rates.res_load[r] / bw[r])
        res_bound, res_name = rates.res_load[k] / bw[k], m.resources[k].name
    t = Timing(full.end, 1, full.end, res_bound, res_name, full.busy[g] if full.busy else 0.0,
               g, chain.hops, [], [], chain.end)
    return t, f"rank {tbs[g][0]} tb {tbs[g][1].id}" if tbs else "none"


@dataclass
class _Outcome:
    end: float
    busy: list[float]
    hops: int


def _schedule(plan, m, tbs, steps, work, rates: _Rates, scale: float) -> _Outcome:
    """Run every threadblock's operations in order, each as soon as what it waits for has
    happened; ``scale`` 0 leaves only the latencies (the hop chain)."""
    mem = m.memory_bw * 1e3
    pair = _pair_channels(plan)
    n = len(tbs)
    clock = [0.0] * n
    hops = [0] * n
    busy = [0.0] * n
    pos = [0] * n
    signals: dict = defaultdict(deque)      # (rank, type, channel) -> (arrival, hops)
    port_done: dict = defaultdict(float)    # (rank, channel) -> when its bytes have crossed
    packets: dict = defaultdict(list)       # (rank, buffer, chunk) -> [(arrival, hops)]
    barriers: dict = {}
    sems: dict = defaultdict(deque)
    todo = set(range(n))
    while todo:
        moved = False
        for g in sorted(todo):
            rank = tbs[g][0]
            while pos[g] < len(steps[g]):
                st = steps[g][pos[g]]
                ready = _ready(plan, rank, g, st, clock, hops, signals, packets, barriers,
                               sems, port_done)
                if ready is None:
                    break
                start, h = ready
                xfers, local = work[g][pos[g]]
                # one operation moves all its peers' bytes at once: it lasts as long as its
                # slowest connection, the threadblock's limit on what it sends or receives
                # in all, or its local work at the memory rate
                dur = local * scale / mem
                out = inn = 0.0
                for x in xfers:
                    if not x.proxy:
                        dur = max(dur, x.nbytes * scale / rates.rate[(x.src, x.dst, g)])
                        out += x.nbytes * (x.src == rank)
                        inn += x.nbytes * (x.dst == rank)
                dur = max(dur, out * scale / rates.tb, inn * scale / rates.tb)
                arrive = start
                for x in xfers:
                    key = (x.src, x.dst, g)
                    a = rates.alpha_of(m, key[:2])
                    if x.proxy:
                        c = st.op.channels[0] if st.op.channels else 0
                        begin = max(start, port_done[(rank, c)])
                        port_done[(rank, c)] = begin + x.nbytes * scale / rates.rate[key]
                        arrive = max(arrive, port_done[(rank, c)] + a)
                    else:
                        arrive = max(arrive, start + dur + a)
                end = start + dur
                _effects(rank, st, end, arrive, h, rates, m, pair, signals, packets, sems,
                         port_done)
                busy[g] += dur
                clock[g], hops[g] = end, h
                pos[g] += 1
                moved = True
            if pos[g] == len(steps[g]):
                todo.discard(g)
        if todo and not moved:
            g = min(todo)
            st = steps[g][pos[g]]
            raise SimulationError(f"MSCCL++ plan {plan.name!r} never finishes: rank {tbs[g][0]} "
                                  f"threadblock {tbs[g][1].id} op {st.index} ({st.op.name}) "
                                  f"waits forever (verify it: `msccl-py verify`)")
    return _Outcome(max(clock, default=0.0), busy, max(hops, default=0))


def _ready(plan, rank, g, st, clock, hops, signals, packets, barriers, sems, port_done):
    """(start time, hop count) of ``st`` on threadblock ``g``, or None while it must wait."""
    op = st.op
    start, h = clock[g], hops[g]
    if op.name in WAITS:
        for c in op.channels:
            q = signals[(rank, op.channel_type, c)]
            if not q:
                return None
        for c in op.channels:
            at, hh = signals[(rank, op.channel_type, c)].popleft()
            start, h = max(start, at), max(h, hh + 1)
        return start, h
    if op.name == "flush":
        return max(start, max((port_done[(rank, c)] for c in op.channels), default=0.0)), h
    if op.name == "barrier":
        # every member waits until the last arrives, then all leave together
        arrived, release = barriers.setdefault((rank, op.barrier_id), ({}, []))
        if release and g not in arrived:
            return None                    # the previous round is still leaving
        arrived[g] = arrived.get(g, (start, h))
        if not release and len(arrived) >= (op.num_threadblocks or 1):
            release.append((max(v[0] for v in arrived.values()),
                            max(v[1] for v in arrived.values())))
        if not release:
            return None
        out = release[0]
        del arrived[g]
        if not arrived:
            release.clear()
        return out
    if op.name == "sem_acquire":
        for s in op.semaphores:
            if not sems[(rank, s)]:
                return None
        for s in op.semaphores:
            at, hh = sems[(rank, s)].popleft()
            start, h = max(start, at), max(h, hh)
        return start, h
    reads = PACKET_READS.get(op.name)
    if reads is not None:
        for ref in op.src[reads]:
            for c in range(ref.index, ref.index + max(1, ref.size)):
                got = packets.get((rank, ref.buffer, c))
                if not got:
                    return None
                at, hh = max(got)
                start, h = max(start, at), max(h, hh + 1)
    return start, h


def _effects(rank, st, end, arrive, h, rates, m, pair, signals, packets, sems,
             port_done) -> None:
    """Signals, packets and semaphore releases an operation leaves for others."""
    op = st.op
    if op.name in SIGNALS or op.name in ("pws", "pwsf"):
        for c in op.channels:
            peer, ctype, back = pair[(rank, op.channel_type, c)]
            at = end + rates.alpha_of(m, (rank, peer))
            if op.channel_type == "port":
                at = max(at, port_done[(rank, c)] + rates.alpha_of(m, (rank, peer)))
            at = max(at, arrive) if op.name in ("pws", "pwsf") else at
            signals[(peer, ctype, back)].append((at, h))
    elif op.name == "sem_release":
        for s in op.semaphores:
            sems[(rank, s)].append((end, h))
    if op.name in PACKET_WRITES:
        for ref in op.dst:
            owner = ref.rank if ref.rank is not None else rank
            at = arrive if owner != rank else end
            for c in range(ref.index, ref.index + max(1, ref.size)):
                packets[(owner, ref.buffer, c)].append((at, h))


def _pair_channels(plan: Plan) -> dict:
    """(rank, type, channel) -> (peer, type, paired channel): the k-th channel of a type from
    A to B meets the k-th one from B to A (the executor's pairing)."""
    ordinal, by_peer = {}, {}
    for g in plan.gpus:
        for t in ("memory", "port"):
            for c, peer in enumerate(g.channel_peers(t)):
                lst = by_peer.setdefault((g.rank, t, peer), [])
                ordinal[(g.rank, t, c)] = (peer, len(lst))
                lst.append(c)
    out = {}
    for (r, t, c), (peer, k) in ordinal.items():
        back = by_peer.get((peer, t, r), [])
        out[(r, t, c)] = (peer, t, back[k] if k < len(back) else None)
    return out
