"""NCCL's own choice of algorithm, protocol and channel count per size, from its tuning model.

NCCL times every (algorithm, protocol) pair as ``latency + bytes / bandwidth``
and runs the fastest (``src/graph/tuning.cc``, ``ncclTopoTuneModel``; the
figures here are NCCL 2.30's). Bandwidth is the rings' bus bandwidth, NCCL's
channels x per-channel speed from its ring search
(:func:`~msccl_py.topologies.rings.ring_search`), refined per protocol: LL rings
at half of it and at most ``llMaxBws``, LL128 at 0.92 of it and at most
``perChMaxRingLL128Bws`` per channel, the tree at 0.92 and ``perChMaxTreeBws``
per channel (LL a further 1/3.8, LL128 7/9), all by GPU generation (Volta,
Ampere, Hopper, Blackwell). Latency is a base per pair plus a per-step NVLink,
PCIe or network latency over 2(n-1) ring steps for allreduce (n-1 for
allgather and reduce-scatter), or twice the tree depth. LL128 runs over
NVLink only, as NCCL enables it by default. Then NCCL uses fewer channels
for small calls (``src/enqueue.cc``): one channel per ``threads x
threadThreshold`` bytes (Simple 512 x 64, LL128 640 x 8, LL 512 x 8 x ranks
on a ring). On AMD Instinct machines the choice is RCCL's, from its own
tuning model (:mod:`msccl_py.tuning.rccl`).

>>> from msccl_py.topologies import load
>>> [nccl_choice("allreduce", s, load("dgx-a100"))[1] for s in (1 << 10, 1 << 22, 1 << 30)]
['LL', 'LL128', 'Simple']
"""

from __future__ import annotations

import math
from typing import Any

from msccl_py.tuning.rccl import amd_arch, rccl_choice
from msccl_py.topologies.rings import ring_bandwidth, ring_search

PROTOCOLS = ("LL", "LL128", "Simple")
ALGORITHMS = ("Ring", "Tree")
#: base latency (µs) per algorithm and protocol (baseLatencies)
BASE_LAT = {"Tree": (6.8, 14.0, 8.4), "Ring": (6.6, 14.0, 8.4)}
#: hardware latency (µs) per step: link class → algorithm → protocol (hwLatencies)
HW_LAT = {"nvlink": {"Tree": (0.6, 1.25, 4.0), "Ring": (0.6, 1.9, 3.4)},
          "pci": {"Tree": (1.0, 1.9, 4.0), "Ring": (1.0, 2.5, 5.7)},
          "net": {"Tree": (5.0, 8.5, 14.0), "Ring": (2.7, 4.0, 14.0)}}
#: per GPU generation (Volta, Ampere, Hopper, Blackwell) and 1 / 2 / more nodes (GB/s)
LL_MAX_BW = ((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0),
             (282.0, 90.0, 70.0))
PER_CH_RING_LL128 = ((20.0,) * 3, (20.0,) * 3, (36.7,) * 3, (40.0,) * 3)
PER_CH_TREE = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0),
               (70.0, 42.8, 24.0))
PER_CH_TREE_LL128 = ((20.0,) * 3, (20.0,) * 3, (36.7, 36.7, 29.0), (55.6, 31.67, 20.0))
#: threads per channel and bytes per thread below which NCCL drops a channel (enqueue.cc)
THREADS = {"LL": 512, "LL128": 640, "Simple": 512}
THREAD_THRESHOLD = {"LL": 8, "LL128": 8, "Simple": 64}
#: per-step overhead of a network hop (µs), x3 for Simple (getNetOverhead, Intel hosts)
NET_OVERHEAD = 1.0


def _generation(arch: int | None) -> int:
    """tuning.cc's compCapIndex; machines whose GPU is not known count as Ampere."""
    if arch is None:
        return 1
    return 3 if arch >= 100 else 2 if arch >= 90 else 1 if arch >= 80 else 0


def _link_kind(topology: Any, rings: list[list[int]]) -> str:
    """The kind of the rings' first direct link (``""`` when they use none)."""
    g = topology.graph
    for ring in rings:
        for a, b in zip(ring, ring[1:] + ring[:1]):
            if g.has_edge(a, b):
                return str(g.edges[a, b].get("kind") or "").lower()
    return ""


def bus_bandwidth(topology: Any) -> tuple[float, int]:
    """(NCCL's ring bus bandwidth in GB/s, its channel count) for ``topology``."""
    found = ring_search(topology)
    channels = len(found.rings)
    bus = ring_bandwidth(topology, found.rings)
    if found.arch is not None:
        bus = min(bus, channels * found.speed) if found.speed != math.inf else bus
    return bus, channels


def nccl_times(collective: str, nbytes: int, topology: Any,
               algorithms: tuple[str, ...] = ALGORITHMS,
               protocols: tuple[str, ...] = PROTOCOLS) -> dict[tuple[str, str], float]:
    """NCCL's predicted time (µs) of each enabled (algorithm, protocol) for one call."""
    found = ring_search(topology)
    n = topology.num_nodes()
    nodes = getattr(topology, "num_machines", 1) or 1
    bus, channels = bus_bandwidth(topology)
    gen = _generation(found.arch)
    col = min(nodes, 3) - 1
    ll_max = LL_MAX_BW[gen if nodes == 1 else 0][col]
    kind = _link_kind(topology, found.rings)
    # xGMI counts as NVLink for latency (RCCL's fast-link class); LL128 runs over NVLink only
    intra = "nvlink" if kind.startswith(("nvlink", "xgmi")) else "pci"
    ll128 = kind.startswith("nvlink")
    steps = 2 * (n - 1) if collective == "allreduce" else n - 1
    inter = 0 if nodes == 1 else (2 if collective == "allreduce" else 1) * (nodes - 1)
    out = {}
    for algo in algorithms:
        if algo == "Tree" and collective != "allreduce":
            continue
        for p, proto in enumerate(PROTOCOLS):
            if proto not in protocols or (proto == "LL128" and not ll128):
                continue
            bw = bus
            if algo == "Ring" and proto == "LL":
                bw = min(ll_max, bw * 0.5)
            elif algo == "Ring" and proto == "LL128":
                bw = min(bw * 0.92, channels * PER_CH_RING_LL128[gen][col])
            elif algo == "Tree":
                bw = min(bw * 0.92, channels * PER_CH_TREE[gen][col])
                if proto == "LL":
                    bw = min(bw / 3.8, ll_max)
                elif proto == "LL128":
                    bw = min(bw * (7 / 9 if nodes == 1 else 120 / 128),
                             channels * PER_CH_TREE_LL128[gen][col])
            algbw = bw * (n / steps if algo == "Ring" else 0.5)
            intra_lat = HW_LAT[intra][algo][p]
            net_lat = HW_LAT["net"][algo][p]
            if algo == "Ring":
                if nodes > 1:
                    intra_lat = max(intra_lat, NET_OVERHEAD * (3 if proto == "Simple" else 1))
                lat = BASE_LAT[algo][p] + (steps - inter) * intra_lat + inter * net_lat
            else:
                lat = BASE_LAT[algo][p] + 2 * ((n // nodes - 1) * intra_lat
                                               + int(math.log2(nodes)) * net_lat)
            out[algo, proto] = lat + nbytes / (1000 * algbw)
    return out


def nccl_choice(collective: str, nbytes: int, topology: Any,
                algorithms: tuple[str, ...] = ALGORITHMS,
                protocols: tuple[str, ...] = PROTOCOLS) -> tuple[str, str]:
    """(algorithm, protocol) NCCL's model picks for one call of ``nbytes`` among those
    allowed (``NCCL_ALGO`` / ``NCCL_PROTO``); RCCL's on AMD Instinct machines."""
    if amd_arch(topology) is not None:
        return rccl_choice(collective, nbytes, topology, algorithms, protocols)
    times = nccl_times(collective, nbytes, topology, algorithms, protocols)
    if not times:
        raise ValueError(f"no algorithm of {algorithms} with a protocol of {protocols} runs "
                         f"{collective}")
    return min(times, key=times.get)


def nccl_channels(nbytes: int, channels: int, protocol: str, nranks: int,
                  algorithm: str = "Ring") -> int:
    """Channels NCCL runs a call of ``nbytes`` on: one fewer while each would get less than
    ``threads x threadThreshold`` bytes.

    >>> nccl_channels(1 << 30, 12, "Simple", 8), nccl_channels(64 << 10, 12, "Simple", 8)
    (12, 2)
    """
    per = THREADS[protocol] * THREAD_THRESHOLD[protocol]
    if algorithm == "Ring" and protocol == "LL":
        per *= nranks
    return max(1, min(channels, nbytes // per))


#: the library's NCCL baselines: program -> (NCCL algorithm, its channel-count parameter)
BASELINES = {"nccl_ring": ("Ring", "rings"), "nccl_ring_allgather": ("Ring", "rings"),
             "nccl_ring_reduce_scatter": ("Ring", "rings"), "nccl_tree": ("Tree", "trees")}


def baseline_picks(program: str, collective: str, sizes: list[int], topology: Any,
                   protocol: str | None = None,
                   channels: int | None = None) -> list[tuple[str, int]]:
    """(protocol, channels) NCCL runs each size with, for baseline ``program`` on
    ``topology``; ``protocol`` / ``channels`` fix one (``NCCL_PROTO``, a ``rings`` count).

    >>> from msccl_py.topologies import load
    >>> baseline_picks("nccl_ring", "allreduce", [1 << 10, 1 << 30], load("dgx-h100"))
    [('LL', 1), ('Simple', 12)]
    """
    algo, _ = BASELINES[program]
    total = len(ring_search(topology).rings)
    out = []
    for nbytes in sizes:
        proto = protocol or nccl_choice(collective, nbytes, topology, (algo,))[1]
        out.append((proto, channels or nccl_channels(nbytes, total, proto,
                                                     topology.num_nodes(), algo)))
    return out


def simulate_baseline(program: str, machine: Any, sizes: list[int], *, topology: str,
                      nodes: int | None = None, protocol: str | None = None,
                      channels: int | None = None, instances: int = 1):
    """Simulate NCCL baseline ``program`` built for machine file ``topology`` (``nodes``
    copies) as NCCL runs each size (:func:`baseline_picks`): (results, picks).

    ``machine`` is the :class:`~msccl_py.simulate.Machine` to time it on (e.g. a
    calibrated copy of the same machine).
    """
    from msccl_py import library
    from msccl_py.simulate import simulate
    from msccl_py.topologies import load
    from msccl_py.library import registry
    spec = registry.get(program)
    topo = load(topology, nodes=nodes)
    picks = baseline_picks(program, spec.operation, sizes, topo, protocol, channels)
    params = {"topology": topology, **({"nodes": nodes} if nodes else {})}
    algs: dict[tuple[str, int], Any] = {}
    results = []
    for nbytes, (proto, count) in zip(sizes, picks):
        alg = algs.get((proto, count))
        if alg is None:
            alg = algs[proto, count] = library.compile(
                program, topo.num_nodes(), instances=instances, protocol=proto,
                **params, **{BASELINES[program][1]: count})
        results.append(simulate(alg, machine, [nbytes])[0])
    return results, picks
