"""NCCL's own cost model: every algorithm and protocol it can run, timed as NCCL times them.

NCCL picks, per call, the (algorithm, protocol) whose ``latency + bytes /
bandwidth`` is least (``ncclTopoTuneModel`` and ``ncclTopoGetAlgoTime`` in
``src/graph/tuning.cc``), then the channel count (``topoGetAlgoInfo`` in
``src/enqueue.cc``). The constants below are NCCL 2.30's (NVIDIA/nccl at
commit 5067397c), cited by the array they come from:

* latency = ``baseLatencies[a][p]`` + steps x ``hwLatencies[hw][a][p]``: a
  ring's 2(n-1) steps for allreduce (n-1 for allgather / reduce-scatter, n
  for broadcast / reduce), of which 2(nodes-1) cross the network; a tree's
  2 x ((n/nodes - 1) intra + log2(nodes) network); NVLS the NVLink figure
  plus one network hop, NVLSTree 2 log2(nodes) of them;
* bandwidth = the graph's channels x per-channel speed (``bwIntra``, or
  ``bwInter`` past two nodes), refined: LL rings at half and at most
  ``llMaxBws`` in all; LL128 rings at 0.92 and ``perChMaxRingLL128Bws`` per
  channel; trees at 0.92 and ``perChMaxTreeBws`` per channel (LL a further
  1/3.8, LL128 7/9 on one node); NVLS at ``nvlsEfficiency`` x (channels-1)
  /channels, doubled for allreduce; then bus to algorithm bandwidth (n /
  steps for rings and NVLS, 1/2 for trees), with the tree's size correction
  (``treeCorrectionFactor``) and the multi-node ring Simple plateau (x1.4);
* channels: from the communicator's (twice the graph's, :func:`comm_channels`)
  NCCL drops one while each would get less than ``threads x
  threadThreshold`` bytes (512 x 64 Simple, 640 x 8 LL128, 512 x 8 x ranks
  for LL rings); NVLS runs ``nvlsChannels`` (16 on Hopper, 24 on one
  Blackwell node, 32 across nodes: ``src/transport/nvls.cc``).

The graphs are NCCL's search's (``src/graph/search.cc``): rings and trees
from :func:`~msccl_py.topologies.rings.ring_search` on one node; across nodes
one channel per NIC speed step (``sm90SpeedArrayInter`` ...) that every
NIC of a node carries, doubled as ``ncclTopoDupChannels`` doubles; NVLS
where the GPUs (compute capability 9.0 and up) sit on an NVSwitch, one
channel per GPU at the highest intra speed for which each GPU's NVLinks carry
its ``ngpus + 1`` shares (``ncclTopoSearchTryNvls``). CollNet needs a SHARP
network plugin, which machine files do not describe, so it is off, as NCCL
has it off there; PAT (allgather and reduce-scatter with one GPU per node,
e.g. ``--layout 4x1``) is priced as tuning.cc prices it.

>>> from msccl_py.topologies import load
>>> t = nccl_tune(load("dgx-h100"), "allreduce")
>>> round(t["NVLS", "Simple"].busbw, 1), t["NVLS", "Simple"].latency
(476.0, 25.0)
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from typing import Any

from msccl_py.errors import MscclError
from msccl_py.simulate.machine import NCCL_NVLS_EFFICIENCY, amd_host, nccl_ll_max_bw
from msccl_py.topologies import networks
from msccl_py.topologies.gpus import first_node, generation, gpu_model, nvls_switch
from msccl_py.topologies.rings import NCCL_NVLINK_BW, NCCL_SPEEDS, ring_bandwidth, ring_search

PROTOCOLS = ("LL", "LL128", "Simple")
ALGORITHMS = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")
#: collectives NCCL's model covers; alltoall is send/recv, outside it (:func:`p2p_time`)
COLLECTIVES = ("allreduce", "allgather", "reduce_scatter", "broadcast", "reduce", "alltoall")

#: baseLatencies (µs) [algorithm] -> (LL, LL128, Simple)
BASE_LAT = {"Tree": (6.8, 14.0, 8.4), "Ring": (6.6, 14.0, 8.4), "NVLS": (0, 0, 0),
            "NVLSTree": (0, 0, 0), "PAT": (8.0, 8.0, 8.0)}
#: hwLatencies (µs) [link class][algorithm] -> (LL, LL128, Simple)
HW_LAT = {"nvlink": {"Tree": (0.6, 1.25, 4.0), "Ring": (0.6, 1.9, 3.4), "NVLS": (0, 0, 25),
                     "NVLSTree": (0, 0, 25), "PAT": (0, 0, 4.0)},
          "pci": {"Tree": (1.0, 1.9, 4.0), "Ring": (1.0, 2.5, 5.7), "NVLS": (0, 0, 0),
                  "NVLSTree": (0, 0, 0), "PAT": (0, 0, 4.0)},
          "net": {"Tree": (5.0, 8.5, 14.0), "Ring": (2.7, 4.0, 14.0), "NVLS": (0, 0, 18),
                  "NVLSTree": (0, 0, 20.9), "PAT": (0, 0, 14)}}
#: per generation (Volta, Ampere, Hopper, Blackwell) x (1 node, 2 nodes, more) in GB/s
PER_CH_RING_LL128 = ((20.0,) * 3, (20.0,) * 3, (36.7,) * 3, (40.0,) * 3)
PER_CH_TREE_LL128 = ((20.0,) * 3, (20.0,) * 3, (36.7, 36.7, 29.0), (55.6, 31.67, 20.0))
PER_CH_TREE = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0),
               (70.0, 42.8, 24.0))
PER_CH_NVLS_TREE = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (0.0, 57.7, 45.5),
                    (0.0, 96.0, 80.0))
#: nvlsEfficiency per generation
NVLS_EFFICIENCY = NCCL_NVLS_EFFICIENCY
#: treeCorrectionFactor[protocol][log2(bytes / 64)], 64 B to 256 MiB
TREE_CORRECTION = (
    (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0,
     1.0, 1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9,
     1.0, 1.0, 1.0),
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9,
     .9, .9))
#: maxThreads per protocol (NCCL_LL_MAX_NTHREADS, NCCL_LL128_MAX_NTHREADS,
#: NCCL_SIMPLE_MAX_NTHREADS: src/include/device.h) and threadThresholds (src/include/comm.h)
THREADS = {"LL": 512, "LL128": 640, "Simple": 512}
THREAD_THRESHOLD = {"LL": 8, "LL128": 8, "Simple": 64}
#: PCI_BW (src/graph/topo.h): rings no faster than this run 256 Simple threads
PCI_BW = 12.0
#: getNetOverhead (µs per network step of a ring; x3 for Simple): x86 AMD hosts 2, Intel
#: and the rest 1
NET_OVERHEAD = 1.0
NET_OVERHEAD_AMD = 2.0
#: ring Simple latency x this across nodes once each channel's share reaches 64 B per rank
RING_PLATEAU = (1.9, 1.4)          # compute capability < 8.0, >= 8.0
#: nvlsChannels (src/transport/nvls.cc): SM90, SM100 one node, SM100 several nodes
NVLS_CHANNELS = (16, 24, 32)
#: NCCL_MAX_NVLS_ARITY (src/include/device.h)
MAX_NVLS_ARITY = 32
#: per-channel speeds NCCL's search tries across nodes (search.cc speedArrayInter ...)
SPEEDS_INTER = {0: (48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0,
                    4.0, 3.0, 2.4, 1.2),
                90: (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0,
                     3.0, 2.4, 1.2),
                100: (96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5,
                      15.0, 12.0, 6.0, 3.0, 2.4, 1.2)}
#: ... and within one node (speedArrayIntra, sm90SpeedArrayIntra, sm100SpeedArrayIntra):
#: the ring search's table
SPEEDS_INTRA = NCCL_SPEEDS
#: most channels a ring graph keeps (MAXCHANNELS / 2)
MAX_GRAPH_CHANNELS = 16
#: MAXCHANNELS (src/include/device.h, NCCL 2.30): most channels a communicator runs
MAX_COMM_CHANNELS = 64


@dataclass(frozen=True)
class Graph:
    """One of NCCL's graphs: channels, per-channel speed within and across nodes (GB/s),
    and the link class of its intra-node hops (``nvlink`` or ``pci``)."""

    channels: int
    bw_intra: float
    bw_inter: float
    intra: str


@dataclass(frozen=True)
class Entry:
    """NCCL's model of one (algorithm, protocol) for one collective: latency (µs) and
    algorithm bandwidth (GB/s, ``bandwidths[coll][a][p]``); ``busbw`` is NCCL's bus figure."""

    latency: float
    bandwidth: float
    busbw: float


def arch_of(topology: Any) -> int | None:
    """Compute capability of the machine's GPUs (its ``model``), None when not NVIDIA."""
    model = gpu_model(getattr(topology, "model", None))
    return model.arch if model is not None else None


def nodes_of(topology: Any) -> int:
    return getattr(topology, "num_machines", 1) or 1


def net_overhead(topology: Any) -> float:
    """``getNetOverhead``: µs per network step of a ring on the machine's host CPUs (AMD 2,
    Intel, Arm and unstated 1)."""
    return NET_OVERHEAD_AMD if amd_host(topology) else NET_OVERHEAD


def _ladder(table: dict, arch: int | None) -> tuple:
    a = arch or 0
    return table[100] if a >= 100 else table[90] if a >= 90 else table[0]


def _link_kind(topology: Any, rings: list[list[int]]) -> str:
    """``nvlink`` when the rings' direct hops are NVLink / xGMI (NCCL's and RCCL's fast
    class), ``pci`` otherwise."""
    g = topology.graph
    for ring in rings:
        for a, b in zip(ring, ring[1:] + ring[:1]):
            if a != b and g.has_edge(a, b):
                kind = str(g.edges[a, b].get("kind") or "").lower()
                via = g.edges[a, b].get("via")
                if via:
                    kind = str(g.nodes[via].get("link") or kind).lower()
                return "nvlink" if kind.startswith(("nvlink", "xgmi", "infinity")) else "pci"
    return "pci"


def _nic_bw(topology: Any) -> tuple[int, float]:
    """(distinct NICs of node 0, the fastest one's GB/s); (0, 0) without NICs."""
    g = topology.graph
    ranks = topology.ranks_of_node(0) if nodes_of(topology) > 1 else range(topology.num_nodes())
    nics = {v for r in ranks for v in topology.nics_of(r)}
    if not nics:
        return 0, 0.0
    return len(nics), max(float(g.nodes[v]["bw"]) for v in nics)


_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _cached(kind: str, topology: Any, build):
    """``build(topology)`` once per topology object (the ring search is the slow part)."""
    try:
        per = _CACHE.setdefault(topology, {})
    except TypeError:
        return build(topology)
    if kind not in per:
        per[kind] = build(topology)
    return per[kind]


def ring_graph(topology: Any) -> Graph:
    """NCCL's ring (and tree) graph of the machine."""
    return _cached("ring", topology, _ring_graph)


def _ring_graph(topology: Any) -> Graph:
    one = topology if nodes_of(topology) == 1 else _one_node(topology)
    if one.num_nodes() == 1:          # one GPU per node: the NICs alone (NCCL's LOC intra)
        arch, channels, speed, intra = arch_of(topology), MAX_GRAPH_CHANNELS, math.inf, "pci"
    else:
        found = ring_search(one)
        arch = found.arch
        channels = len(found.rings)
        if found.arch is not None and found.speed != math.inf:
            speed = found.speed
        else:
            speed = ring_bandwidth(one, found.rings) / max(1, channels)
        intra = _link_kind(one, found.rings)
        if nodes_of(topology) == 1:
            return Graph(channels, speed, speed, intra)
    nics, nic = _nic_bw(topology)
    if not nics:
        raise MscclError(f"machine '{topology.name}' has no NICs to join its nodes")
    total = channels * speed          # what the node's GPUs carry per direction (NCCL budget)
    best = (0, 0.0)
    for s in _ladder(SPEEDS_INTER, arch):
        if s > min(nic, speed * channels):
            continue
        ch = min(MAX_GRAPH_CHANNELS, nics * int(nic // s),
                 MAX_GRAPH_CHANNELS if math.isinf(total) else int(total // s))
        if ch * s > best[0] * best[1]:
            best = (ch, s)
        elif best[0] and s / best[1] <= 0.49:
            break
    ch, s = best
    # ncclTopoDupChannels: doubled unless slow, or Hopper+ channels below 50 GB/s past 4
    if s >= 25.0 and not ((arch or 0) > 80 and s < 50.0 and ch > 4):
        dup = min(ch * 2, MAX_GRAPH_CHANNELS)
        s /= math.ceil(dup / ch)
        ch = dup
    return Graph(ch, s, s, intra)


def tree_graph(topology: Any) -> Graph:
    """NCCL's tree graph: the ring graph's channels and network speed, with the speed
    within a node raised (``ncclTopoCompute``'s second pass, "increase bwIntra for trees (2
    nodes or collnet)", ``src/graph/search.cc``): step by step up the network speed table
    while it is below twice the network speed and the node's GPUs still carry every
    channel at it. tuning.cc prices trees of two nodes at that speed (``bwIntra``)."""
    return _cached("tree", topology, _tree_graph)


def _tree_graph(topology: Any) -> Graph:
    ring = ring_graph(topology)
    if nodes_of(topology) != 2 or ring.channels == 0:
        return ring
    one = _one_node(topology)
    if one.num_nodes() == 1:
        return ring
    found = ring_search(one)
    budget = len(found.rings) * (found.speed if found.speed != math.inf else
                                 ring_bandwidth(one, found.rings) / max(1, len(found.rings)))
    speed = ring.bw_intra
    for s in sorted(x for x in _ladder(SPEEDS_INTER, arch_of(topology)) if x > ring.bw_intra):
        if speed >= 2 * ring.bw_inter or ring.channels * s > budget + 1e-9:
            break
        speed = s
    return Graph(ring.channels, speed, ring.bw_inter, ring.intra)


def _one_node(topology: Any):
    return first_node(topology)


def nvls_graph(topology: Any) -> Graph | None:
    """NCCL's NVLS graph: GPUs of compute capability 9.0 and up on an NVSwitch, one
    channel per GPU of a node at the highest intra speed each GPU's NVLinks carry
    ``ngpus + 1`` times; None where the machine has no NVLink SHARP."""
    return _cached("nvls", topology, _nvls_graph)


def _nvls_graph(topology: Any) -> Graph | None:
    switch = nvls_switch(topology)
    per_node = topology.num_nodes() // nodes_of(topology)
    if switch is None or per_node > MAX_NVLS_ARITY:
        return None
    arch = arch_of(topology)
    links = int(switch.get("count") or 0)
    nvlink = next(bw for cc, bw in NCCL_NVLINK_BW if arch >= cc)
    budget = links * nvlink
    speeds = _ladder(SPEEDS_INTRA, arch)
    speed = next((s for s in speeds if s * (per_node + 1) <= budget), speeds[-1])
    inter = speed
    if nodes_of(topology) > 1:
        _, nic = _nic_bw(topology)
        inter = next((s for s in _ladder(SPEEDS_INTER, arch) if s <= min(nic, speed)), 0.0)
    return Graph(per_node, speed, inter, "nvlink")


def nccl_tune(topology: Any, collective: str, channels: int | None = None,
              fabric: bool = False) -> dict[tuple[str, str], Entry]:
    """NCCL's model of every enabled (algorithm, protocol) of ``collective`` on
    ``topology`` (``ncclTopoTuneModel``); alltoall has none (send/recv is not tuned).
    ``channels`` prices the rings and trees on that many channels instead of the graph's
    (what a small call runs on). ``fabric`` caps the inter-node bandwidth where the
    cluster's leaf uplinks are busier than its NICs (:func:`fabric_cap`): what the call
    really gets, which NCCL's own model (and so its choice) does not see."""
    if collective not in COLLECTIVES:
        raise MscclError(f"NCCL's model has no collective {collective!r}; "
                         f"known: {', '.join(COLLECTIVES)}")
    if collective == "alltoall":
        return {}
    n = topology.num_nodes()
    nodes = nodes_of(topology)
    ring, tree = ring_graph(topology), tree_graph(topology)
    if channels is not None:
        ring = Graph(channels, ring.bw_intra, ring.bw_inter, ring.intra)
        tree = Graph(channels, tree.bw_intra, tree.bw_inter, tree.intra)
    graphs = {"Ring": ring, "Tree": tree}
    nvls = nvls_graph(topology)
    if nvls is not None:
        graphs["NVLS" if nodes == 1 else "NVLSTree"] = nvls
    # PAT: allgather / reduce-scatter with one GPU per node (ncclPatEnable), Simple only
    if nodes == n and nodes > 1 and (arch_of(topology) or 80) >= 60:
        graphs["PAT"] = ring
    arch = arch_of(topology)
    gen = generation(arch)
    col = min(nodes, 3) - 1
    net = networks.of_topology(topology)
    plugin_us = net.plugin_latency_us if net is not None else 0.0
    ll_max = nccl_ll_max_bw(topology, gen)
    ppn = n / nodes
    steps = (2 * (n - 1) if collective == "allreduce" else n - 1
             if collective in ("allgather", "reduce_scatter") else n)
    out = {}
    for algo, gr in graphs.items():
        if collective in ("broadcast", "reduce") and algo != "Ring":
            continue
        if collective in ("allgather", "reduce_scatter") and algo not in ("Ring", "NVLS", "PAT"):
            continue
        if algo == "PAT" and collective not in ("allgather", "reduce_scatter"):
            continue
        for p, proto in enumerate(PROTOCOLS):
            if algo in ("NVLS", "NVLSTree", "PAT") and proto != "Simple":
                continue
            # LL128: on by default over NVLink (typeIntra <= PATH_NVB) and, on Hopper+,
            # across nodes through the GPU's own NIC
            if proto == "LL128" and (gr.intra != "nvlink" or (arch or 0) < 70
                                     or arch is None):
                continue
            bw = gr.bw_intra if nodes <= 2 else gr.bw_inter
            net_cap = fabric_cap(topology, algo, gr.channels) if fabric else math.inf
            if algo in ("Ring", "Tree"):
                bw = min(bw, net_cap)
            if algo.startswith("NVLS"):
                if gr.channels < 2:
                    continue
                intra_bw = gr.bw_intra * NVLS_EFFICIENCY[gen] * (gr.channels - 1) / gr.channels
                intra_bw *= 2.0 if collective == "allreduce" else (ppn - 1) / ppn
                inter_bw = min(gr.bw_inter * (2 if nodes <= 2 and algo == "NVLSTree" else 1),
                               net_cap)
                cap = PER_CH_NVLS_TREE[gen][col] if algo == "NVLSTree" else math.inf
                bw = min(intra_bw, inter_bw if nodes > 1 else math.inf, cap)
            bus = gr.channels * bw
            if algo == "Ring" and proto == "LL":
                bus = min(ll_max, bus * 0.5)
            if algo == "Ring" and proto == "LL128":
                bus = min(bus * 0.92, gr.channels * PER_CH_RING_LL128[gen][col])
            if algo == "Tree" and collective == "allreduce":
                bus = min(bus * 0.92, gr.channels * PER_CH_TREE[gen][col])
            if algo == "Tree" and proto == "LL":
                bus = min(bus / 3.8, ll_max)
            if algo == "Tree" and proto == "LL128":
                bus = min(bus * (7 / 9 if nodes == 1 else 120 / 128),
                          gr.channels * PER_CH_TREE_LL128[gen][col])
            if algo == "PAT":
                bus *= 0.75
            busbw = bus
            if not (algo != "Ring" and collective in ("allgather", "reduce_scatter")):
                bus *= n / steps if algo in ("Ring", "NVLS", "NVLSTree") else 0.5
            out[algo, proto] = Entry(sum(latency_parts(algo, p, collective, gr, n, nodes,
                                                       steps, plugin_us=plugin_us,
                                                       net_overhead=net_overhead(topology))),
                                     bus, busbw)
    return out


def fabric_cap(topology: Any, algo: str, channels: int) -> float:
    """Per-channel inter-node GB/s a cluster's leaf/spine fabric leaves ``algo``: its share
    of the NICs (:func:`~msccl_py.tuning.nccl_fabric.fabric_share`) over the channels;
    inf where the fabric is not the limit."""
    from msccl_py.tuning.nccl_fabric import fabric_share
    share, _ = fabric_share(topology, algo)
    if share >= 1.0 or nodes_of(topology) < 2:
        return math.inf
    nics, nic = _nic_bw(topology)
    return share * nics * nic / max(1, channels)


def latency_parts(algo: str, p: int, collective: str, gr: Graph, n: int, nodes: int,
                  steps: int, plugin_us: float = 0.0, net_overhead: float = NET_OVERHEAD
                  ) -> tuple[float, float, float, float]:
    """tuning.cc's latency of one call as (base, intra-node hops, network hops, the
    network plugin's reported latency on those hops) in µs, NCCL's hardware figures
    throughout (their sum is NCCL's latency). tuning.cc adds the plugin's latency
    (``graphs[a]->latencyInter``) to each network hop, twice for Simple (its flush)."""
    base, intra, inter = _hw_parts(algo, p, collective, gr, n, nodes, steps, net_overhead)
    return base, intra, inter, plugin_us * (2 if p == 2 else 1) * net_hops(
        algo, collective, n, nodes)


def net_hops(algo: str, collective: str, n: int, nodes: int) -> float:
    """How many network hops (``interLat``) tuning.cc charges one call of ``algo``."""
    if nodes < 2 or (algo == "Ring" and collective in ("broadcast", "reduce")):
        return 0.0      # broadcast / reduce rings charge the NET figure per step instead
    log = int(math.log2(nodes))
    if algo == "Ring":
        return (2 if collective == "allreduce" else 1) * (nodes - 1)
    if algo == "NVLS":
        return 1.0
    if algo == "PAT":
        return log / 3.5
    return 2.0 * log            # Tree, NVLSTree


def ring_crossings(collective: str, n: int, nodes: int) -> float:
    """Network crossings on a ring call's critical path, where tuning.cc charges
    :func:`net_hops` (2(nodes-1) for allreduce, nodes-1 for allgather / reduce-scatter).

    A ring visits each node's GPUs in a row, so one lap crosses the network ``nodes``
    times. Each step waits for the step before it on the previous rank, so the chain of
    2(n-1) steps of an allreduce runs the ring's edges all but two, and that of n-1
    steps of an allgather all but one: it crosses the network 2 x nodes times (nodes for
    allgather / reduce-scatter) less the crossings among the edges it skips, which are all
    within a node with 3 or more GPUs per node (2 x nodes - 1 with 2; with one GPU per node
    every edge crosses and tuning.cc's count is exact). Broadcast and reduce are left to
    tuning.cc's per-step count."""
    hops = net_hops("Ring", collective, n, nodes)
    if nodes < 2 or collective not in ("allreduce", "allgather", "reduce_scatter"):
        return hops
    ppn = n // nodes
    if collective == "allreduce":
        return float(2 * nodes - max(0, 3 - ppn))
    return float(nodes - (1 if ppn == 1 else 0))


def _hw_parts(algo: str, p: int, collective: str, gr: Graph, n: int, nodes: int,
              steps: int, net_overhead: float = NET_OVERHEAD) -> tuple[float, float, float]:
    base = BASE_LAT[algo][p]
    intra = HW_LAT[gr.intra][algo][p]
    ppn = n / nodes
    inter = HW_LAT["net"]["Tree" if ppn == 1 else algo][p]
    if algo == "Ring":
        cls = gr.intra if nodes == 1 else "net"
        hw = HW_LAT[cls]["Tree" if collective in ("broadcast", "reduce") and p == 2
                         else "Ring"][p]
        if collective in ("broadcast", "reduce"):
            return (base, steps * hw, 0.0) if nodes == 1 else (base, 0.0, steps * hw)
        if nodes > 1:
            intra = max(intra, net_overhead * (3 if p == 2 else 1))
        inter_steps = 0 if nodes == 1 else (2 if collective == "allreduce" else 1) * (nodes - 1)
        return base, (steps - inter_steps) * intra, inter_steps * inter
    if algo == "Tree":
        return base, 2 * (n // nodes - 1) * intra, 2 * int(math.log2(nodes)) * inter
    if algo == "NVLS":
        return 0.0, intra, inter if nodes > 1 else 0.0
    if algo == "PAT":      # log latency across nodes, and "still a linear part": 2.8 per rank
        return base + n * 2.8, 0.0, int(math.log2(nodes)) * inter / 3.5
    return base, intra, 2 * int(math.log2(nodes)) * inter       # NVLSTree


def algo_time(entry: Entry, algo: str, proto: str, collective: str, nbytes: int,
              topology: Any) -> float:
    """``ncclTopoGetAlgoTime`` for one call (µs)."""
    bw = entry.bandwidth
    log_size = int(math.log2(nbytes >> 6)) if nbytes >= 64 else -1
    p = PROTOCOLS.index(proto)
    if algo == "Tree" and collective == "allreduce" and 0 <= log_size < 23:
        bw *= TREE_CORRECTION[p][log_size]
    lat = entry.latency
    nodes = nodes_of(topology)
    if algo == "Ring" and proto == "Simple" and nodes > 1 and collective == "allreduce":
        ch = ring_graph(topology).channels
        if nbytes / (ch * topology.num_nodes()) >= 64:
            lat *= RING_PLATEAU[(arch_of(topology) or 80) >= 80]
    return lat + nbytes / (1000 * bw)


@dataclass(frozen=True)
class Choice:
    """What NCCL runs one call with, and the time its model gives it (µs)."""

    algorithm: str
    protocol: str
    channels: int
    threads: int
    model_us: float

    def __getitem__(self, k):
        """``choice[:2]`` is (algorithm, protocol), as the older tuple API gave it."""
        return (self.algorithm, self.protocol, self.channels, self.threads, self.model_us)[k]


def choose(topology: Any, collective: str, nbytes: int, *,
           algorithms: tuple[str, ...] | None = None,
           protocols: tuple[str, ...] | None = None) -> Choice:
    """NCCL's choice for one call of ``nbytes`` (nccl-tests' size) among the enabled
    algorithms and protocols (``NCCL_ALGO`` / ``NCCL_PROTO``)."""
    table = nccl_tune(topology, collective)
    net = networks.of_topology(topology)
    if protocols is None and net is not None:
        protocols = net.protocols       # the network's standard NCCL_PROTO
    times = {k: algo_time(e, *k, collective, nbytes, topology) for k, e in table.items()
             if (algorithms is None or k[0] in algorithms)
             and (protocols is None or k[1] in protocols)}
    if not times:
        raise MscclError(f"NCCL runs no algorithm of {', '.join(algorithms or ALGORITHMS)} "
                         f"with protocol {', '.join(protocols or PROTOCOLS)} for {collective} "
                         f"on '{topology.name}'")
    algo, proto = min(times, key=times.get)
    ch, nt = channels_for(topology, algo, proto, nbytes)
    return Choice(algo, proto, ch, nt, times[algo, proto])


def comm_channels(topology: Any) -> int:
    """The channels an NVIDIA communicator runs rings and trees on (``comm->nChannels``):
    twice its graph's, as ``ncclTopoPostset`` duplicates them ("Duplication should be
    complete now": ``std::min(MAXCHANNELS, nChannels * 2)``, ``src/graph/connect.cc``),
    and twice again on Hopper+ across nodes where the ring's graph runs above 45 GB/s per
    channel on fewer than 16 ("Use 4 compute channels per search channel"). Each carries
    its graph channel's bytes in half (the graph's per-channel speed is a search figure of
    the links, which the duplicates share): ``topoGetAlgoInfo`` starts its count of a
    small call's channels from this."""
    ring = ring_graph(topology)
    nc = min(MAX_COMM_CHANNELS, 2 * ring.channels)
    if (arch_of(topology) or 0) >= 90 and nodes_of(topology) > 1 and ring.bw_intra > 45.0 \
            and nc < 16:
        nc *= 2
    return nc


def channels_for(topology: Any, algo: str, proto: str, nbytes: int) -> tuple[int, int]:
    """(channels, threads) ``topoGetAlgoInfo`` gives the call: from the communicator's
    channels (:func:`comm_channels`; RCCL's graph's on AMD), one fewer while each would
    get less than ``threads x threadThreshold`` bytes."""
    nodes = nodes_of(topology)
    if algo.startswith("NVLS"):
        gen = generation(arch_of(topology))
        nc = NVLS_CHANNELS[0] if gen < 3 else NVLS_CHANNELS[2 if nodes > 1 else 1]
        if algo == "NVLS" and nodes > 1:
            nc = min(nc, ring_graph(topology).channels)
        return nc, 640
    ring = ring_graph(topology)
    nc = ring.channels if arch_of(topology) is None else comm_channels(topology)
    nt = THREADS[proto]
    if proto == "Simple" and algo == "Ring" and ring.bw_intra * ring.channels <= PCI_BW:
        nt = 256
    thr = THREAD_THRESHOLD[proto] * (topology.num_nodes() if algo == "Ring" and proto == "LL"
                                     else 1)
    while nbytes < nc * nt * thr and nc >= 2:
        nc -= 1
    while nbytes < nc * nt * thr and nt % 128 == 0:
        nt //= 2
    return nc, nt
