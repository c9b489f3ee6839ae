"""Timing MSCCL++ execution plans: one-sided operations over the machine's links.

An MSCCL++ plan (:mod:`msccl_py.mscclpp_ir`) runs once per call: every
threadblock runs its operations in order, and threadblocks meet only through
signal/wait pairs, barriers, semaphores and LL packet flags. The model times
each operation on the same :class:`~msccl_py.simulate.machine.Machine` as the
MSCCL engine, and runs the call in time order
(:mod:`msccl_py.simulate.oneside_schedule`):

* a **memory channel** ``put``/``pws``/``pwsf`` (and an LL ``ppkt``) is the
  threadblock writing its bytes over the path to the peer, ``get`` and the
  remote sources of ``rre``/``rres`` reading them back over the peer's path
  (LL packets: twice the bytes). An operation moves all its peers' bytes at
  once: it lasts as long as its slowest connection, or the threadblock's
  limit on all it sends (or receives). These connections share each
  resource in proportion to their bytes, as in the MSCCL engine; the
  segments of one cut threadblock (chained by a semaphore) count as one
  connection, since they never run at once;
* a **port channel** ``put`` hands the bytes to the channel's proxy (one
  queue pair per channel in the executor): the threadblock goes on, the
  channel's transfers cross one after another, and a ``signal``, ``pws`` or
  ``flush`` on that channel comes after them (``pwsf`` and ``flush`` hold the
  threadblock until then). The transfers in flight share what the memory
  channels leave of each resource max-min fairly as they start and end, so
  one transfer alone has a NIC to itself;
* ``copy``, ``re`` and unpacking run at the machine's memory rate; ``res``
  and the packet reduce-sends write their result to the peers as well;
* a ``wait`` ends when the k-th signal on its channel pair has crossed the
  path (its α), a packet read when the packets it reads have arrived, a
  barrier when its last threadblock arrives, a ``sem_acquire`` when the
  matching ``sem_release`` ran.

MSCCL++ signals are single flag writes, so a hop costs its path's α without
NCCL's per-protocol latency; the call pays the protocol's fixed cost.
NVLink SHARP (switch channels) moves each byte once per port: ``gstore``
(``multimem.st``) sends the rank's bytes once out of its switch port and the
switch copies them into every member's port; ``glres``
(``multimem.ld_reduce``, then the store) has every member's port send its
part once, the switch sum it, and the sum come once into the rank's port,
then stores it as ``gstore`` does (``gstorepkt``: LL packets, twice the
bytes). So the switch's reduction and multicast cost no extra port traffic,
which is what lets NVLS exceed a ring (``simulate nccl``'s NVLS figures are
NCCL's own, with its efficiency). A machine without such a switch refuses
these plans.

>>> from msccl_py import library
>>> from msccl_py.targets.mscclpp.emit import lower
>>> plan = lower(library.compile("allgather_ring", 8, use_cache=False))
>>> r = simulate_plan(plan, "dgx-h100", "1GiB")[0]
>>> r.bottleneck.startswith("threadblock rank")
True
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from msccl_py.errors import SimulationError
from msccl_py.plan.mscclpp.memory import Step, expand
from msccl_py.plan.mscclpp.geometry import geometry, group_share
from msccl_py.mscclpp_ir import Plan
from msccl_py.simulate.engine import Timing
from msccl_py.simulate.machine import Machine, Path, machine_model
from msccl_py.simulate.oneside_schedule import EFFECTS, PACKET_WRITES, Op, Schedule, kind_of
from msccl_py.simulate.results import Result, busbw_factor, parse_sizes

#: operations of NVLink SHARP (switch channels): in-switch reduction and multicast
NVLS_OPS = ("glres", "gstore", "gstorepkt")


def simulate_plan(plan: Plan, machine, sizes) -> list[Result]:
    """Predicted :class:`~msccl_py.simulate.Result` per size of MSCCL++ ``plan`` on
    ``machine`` (a Machine, Topology, name or path)."""
    from msccl_py.simulate import bottleneck, check_ranks
    m = machine if isinstance(machine, Machine) else machine_model(machine)
    check_ranks(plan.nranks, m)
    _check_nvls(plan, m)
    proto = "LL" if plan.packets else "Simple"
    base = m.fixed_us(proto)
    out = []
    chains: dict = {}
    for nbytes in parse_sizes(sizes):
        t, block = _timing(plan, m, nbytes, proto, chains)
        time_us = t.time_us + base
        algbw = nbytes / (time_us * 1e3)
        out.append(Result(nbytes, time_us, algbw,
                          algbw * busbw_factor(plan.collective, plan.nranks),
                          bottleneck(None, t, base, block), proto, 1,
                          t.resource_bound_us / t.time_us if t.time_us else 0.0))
    return out


def _check_nvls(plan: Plan, m: Machine) -> None:
    """Refuse a plan using switch channels on a machine without NVLink SHARP."""
    from msccl_py.topologies.gpus import nvls_switch
    capable = nvls_switch(m.topology) is not None
    for g in plan.gpus:
        for tb in g.threadblocks:
            for op in tb.ops:
                for o in [op] + op.ops:
                    if (o.name in NVLS_OPS or o.channel_type == "switch") and not (
                            capable and _switch_of(m, g.rank) is not None):
                        raise SimulationError(
                            f"MSCCL++ plan {plan.name!r} uses NVLink SHARP ({o.name} at "
                            f"{o.path or f'rank {g.rank} tb {tb.id}'}), which machine "
                            f"'{m.name}' does not have (NVSwitches of Hopper and later GPUs "
                            f"reduce and multicast); simulate it on dgx-h100, hgx-h200, ...")


def _nvls_efficiency(m: Machine) -> float:
    from msccl_py.simulate.machine import NCCL_NVLS_EFFICIENCY
    from msccl_py.topologies.gpus import generation, gpu_model
    model = gpu_model(getattr(m.topology, "model", None))
    return (NCCL_NVLS_EFFICIENCY[generation(model.arch)] or 1.0) if model else 1.0


def _switch_of(m: Machine, rank: int) -> str | None:
    """The switch rank ``rank``'s NVLinks attach to (None: none)."""
    g = m.topology.graph
    return next((v for v in g.successors(rank) if not isinstance(v, int)
                 and g.nodes[v].get("kind") == "switch"), None)


def _path(m: Machine, src, dst) -> Path:
    """A rank pair's path, or one port of a switch: ``("switch", r)`` as ``dst`` is rank r's
    port into the switch (its port out), as ``src`` the switch's port into rank r."""
    if not isinstance(src, tuple) and not isinstance(dst, tuple):
        return m.path(src, dst)
    rank = dst[1] if isinstance(dst, tuple) else src[1]
    sw = _switch_of(m, rank)
    node = m.topology.graph.nodes[sw]
    port = node.get("port_bw") or 0.0
    way = "out" if isinstance(dst, tuple) else "in"
    k = m._resource(f"switch {sw} port {rank} {way}", port)
    peer = next((r for r in node.get("gpus") or () if r != rank), rank)
    alpha = m.path(rank, peer).alpha_us / 2 if peer != rank else 0.0
    return Path(src if not isinstance(src, tuple) else -1,
                dst if not isinstance(dst, tuple) else -1, (k,), alpha,
                m.resources[k].bw_GBps, 1)


def _switch_transfers(plan: Plan, rank: int, op, size: float, eff: float) -> list:
    """The port crossings of one NVLink SHARP operation (see the module docstring), at
    NCCL's NVLS efficiency ``eff`` (its data share of the port)."""
    size /= eff
    wire = 2.0 if op.name == "gstorepkt" else 1.0
    out = []
    if op.name == "glres":
        group = plan.gpus[rank].switch_channels[op.src[0].switch].ranks
        out += [_Xfer(r, ("switch", r), size, False) for r in group]
        out.append(_Xfer(("switch", rank), rank, size, False))
    dst = op.dst[0]
    group = plan.gpus[rank].switch_channels[dst.switch].ranks
    out.append(_Xfer(rank, ("switch", rank), size * wire, False))
    out += [_Xfer(("switch", r), r, size * wire, False) for r in group]
    return out


@dataclass
class _Xfer:
    """Bytes one operation moves over one rank pair (src -> dst): by the threadblock itself
    (memory channel) or handed to the proxy of port channel ``channel`` (``proxy``)."""

    src: int
    dst: int
    nbytes: float
    proxy: bool
    channel: int = 0


def _bytes(plan: Plan, st: Step, chunk: int, ref) -> float:
    total = ref.size * chunk
    if st.unit is not None:
        total = max(0, min(st.unit, total - st.offset))
    if st.op.tbg is not None:
        total = group_share(total, st.op.tbg[0], st.op.tbg[1], plan.buffer_alignment)[1]
    return float(total)


def _transfers(plan: Plan, rank: int, op, size: float,
               nvls_eff: float = 1.0) -> tuple[list[_Xfer], float]:
    """Remote transfers of one operation moving ``size`` bytes per reference, and its local
    work in bytes (at the memory rate)."""
    if op.name in NVLS_OPS:
        return _switch_transfers(plan, rank, op, size, nvls_eff), 0.0
    proxy = op.channel_type == "port"
    wire = 2.0 if op.name in PACKET_WRITES else 1.0   # LL packets: 8 data bytes per 16
    xfers = [_Xfer(ref.rank, rank, size, proxy) for ref in op.src
             if ref.kind == "remote" and ref.rank not in (None, rank)]
    remote = [ref for ref in op.dst if ref.kind == "remote" and ref.rank not in (None, rank)]
    # the i-th output goes over the i-th channel (the executor's channelIndexes[i])
    chans = op.channels if len(op.channels) == len(remote) else (op.channels[:1] or (0,)) * len(remote)
    xfers += [_Xfer(rank, ref.rank, size * wire, proxy, c) for ref, c in zip(remote, chans)]
    local = 0.0 if op.name in ("put", "pws", "pwsf", "get", "ppkt", "rppkt") else size
    return xfers, local


def _chains(plan: Plan, tbs: list) -> list[int]:
    """Per threadblock, the first of the chain it belongs to: a block whose first operation
    acquires only semaphores that one other block releases, in its last operation, runs
    after that block (the emitter's segments of a long threadblock), so the two never
    share a link."""
    releasers: dict = defaultdict(set)
    last_release: dict = {}
    for g, (rank, tb) in enumerate(tbs):
        for k, op in enumerate(tb.ops):
            if op.name == "sem_release":
                for s in op.semaphores:
                    releasers[(rank, s)].add(g)
                    if k == len(tb.ops) - 1:
                        last_release[(rank, s)] = g
    before = list(range(len(tbs)))
    for g, (rank, tb) in enumerate(tbs):
        first = tb.ops[0] if tb.ops else None
        if first is None or first.name != "sem_acquire" or not first.semaphores:
            continue
        prev = {last_release.get((rank, s)) for s in first.semaphores}
        if len(prev) == 1 and None not in prev and all(
                releasers[(rank, s)] == prev for s in first.semaphores):
            before[g] = next(iter(prev))
    root = []
    for g in range(len(tbs)):
        r, seen = g, 0
        while before[r] != r and seen < len(tbs):   # a cycle of segments never runs anyway
            r, seen = before[r], seen + 1
        root.append(r)
    return root


class _Rates:
    """Per threadblock-driven connection (sender, receiver, chain of blocks): its share of
    every resource on the pair's path, in proportion to its bytes (bytes/µs); per resource:
    the share the proxies' transfers take (they share it among themselves as they run);
    per pair: the path's α."""

    def __init__(self, m: Machine, load: dict, proto: str):
        self.m = m
        res_load = defaultdict(float)
        port_load = defaultdict(float)
        paths = {conn[:2]: _path(m, *conn[:2]) for conn in load}
        for conn, nbytes in load.items():
            for r in paths[conn[:2]].resources:
                res_load[r] += nbytes
                if conn[2] is None:
                    port_load[r] += nbytes
        tb = m.threadblock_limit(proto)
        self.alpha = {pair: p.alpha_us for pair, p in paths.items()}
        self.paths = paths
        self.rate, self.tb = {}, (tb or np.inf) * 1e3
        for conn, nbytes in load.items():
            if conn[2] is None:
                continue
            # a connection that moves nothing (zero-sized slices) has nothing to share
            share = min((m.resources[r].bw_GBps * (nbytes / res_load[r] if nbytes else 1.0)
                         for r in paths[conn[:2]].resources), default=np.inf)
            self.rate[conn] = share * 1e3
        self.proxy_capacity = [r.bw_GBps * 1e3 * (port_load[k] / res_load[k] if res_load[k]
                                                  else 1.0)
                               for k, r in enumerate(m.resources)]
        self.res_load = res_load

    def alpha_of(self, pair) -> float:
        if pair not in self.alpha:
            self.alpha[pair] = _path(self.m, *pair).alpha_us
        return self.alpha[pair]


def _timing(plan: Plan, m: Machine, nbytes: int, proto: str,
            chains: dict) -> tuple[Timing, str]:
    """One size's :class:`Timing` and its busiest threadblock's name. The hop chain (the
    call with every byte taken away) depends on the size only through how many slices
    the pipelines cut: ``chains`` keeps it per count of steps per threadblock."""
    chunk = geometry(plan, nbytes).chunk
    tbs = [(g.rank, tb) for g in plan.gpus for tb in g.threadblocks]
    chain = _chains(plan, tbs)
    eff = _nvls_efficiency(m)
    # pipelines repeat the same operation on slices of one size: its work is worked out once
    kinds: dict = {}
    work = []
    load: dict = defaultdict(float)
    for g, (rank, tb) in enumerate(tbs):
        row = []
        for st in expand(plan, chunk, tb.ops):
            refs = st.op.src or st.op.dst
            size = _bytes(plan, st, chunk, refs[0]) if refs else 0.0
            key = (g, id(st.op), size)
            w = kinds.get(key)
            if w is None:
                w = kinds[key] = _transfers(plan, rank, st.op, size, eff)
                w = kinds[key] = (w[0], w[1], key)
            for x in w[0]:
                load[(x.src, x.dst, None if x.proxy else chain[g])] += x.nbytes
            row.append((st, w))
        work.append(row)
    rates = _Rates(m, load, proto)
    ops = _ops(m, tbs, work, rates, chain)
    full = Schedule(plan, tbs, ops, rates, rates.alpha_of).run(1.0)
    shape = tuple(len(row) for row in ops)
    hops = chains.get(shape)
    if hops is None:
        hops = chains[shape] = Schedule(plan, tbs, ops, rates, rates.alpha_of).run(0.0)
    # a chain of segments is one threadblock's work, cut to fit the executor
    busy = [0.0] * len(tbs)
    for g, b in enumerate(full.busy):
        busy[chain[g]] += b
    g = int(np.argmax(busy)) if busy else 0
    bw = np.array([r.bw_GBps for r in m.resources]) * 1e3
    res_bound, res_name = 0.0, None
    if rates.res_load:
        k = max(rates.res_load, key=lambda r: rates.res_load[r] / bw[r])
        res_bound, res_name = rates.res_load[k] / bw[k], m.resources[k].name
    t = Timing(full.end, 1, full.end, res_bound, res_name, busy[g] if busy else 0.0,
               g, hops.hops, [], [], hops.end)
    if not tbs:
        return t, "none"
    segments = chain.count(g) - 1
    more = f" and its {segments} segment{'s' * (segments > 1)}" if segments else ""
    return t, f"rank {tbs[g][0]} tb {tbs[g][1].id}{more}"


def _ops(m: Machine, tbs: list, work: list, rates: _Rates,
         chain: list[int]) -> list[list[Op]]:
    """Every threadblock's steps as :class:`Op` records: one operation moves all its peers'
    bytes at once, so it lasts as long as its slowest connection, the threadblock's limit on
    what it sends or receives in all, or its local work at the memory rate; the proxy's
    transfers leave the block at once."""
    mem = m.memory_bw * 1e3
    timed: dict = {}
    out = []
    for g, row in enumerate(work):
        rank = tbs[g][0]
        ops = []
        for st, (xfers, local, key) in row:
            rec = timed.get((key, st.index))
            if rec is None:
                dur, sent, got, alpha, proxy = local / mem, 0.0, 0.0, -1.0, []
                for x in xfers:
                    if x.proxy:
                        proxy.append(((rank, x.channel), x.src, x.dst, x.nbytes))
                        continue
                    dur = max(dur, x.nbytes / rates.rate[(x.src, x.dst, chain[g])])
                    sent += x.nbytes * (x.src == rank)
                    got += x.nbytes * (x.dst == rank)
                    alpha = max(alpha, rates.alpha_of((x.src, x.dst)))
                o = st.op
                drain = tuple(o.channels) if o.name == "pwsf" and o.channel_type == "port" else ()
                rec = timed[(key, st.index)] = Op(
                    o, st.index, kind_of(o.name), max(dur, sent / rates.tb, got / rates.tb),
                    alpha, tuple(proxy), o.name in EFFECTS, drain)
            ops.append(rec)
        out.append(ops)
    return out
