"""RCCL's own choices on AMD GPUs: its tuning model, and the MSCCL algorithms it ships.

RCCL (ROCm/rccl at commit 0cbce2a7) keeps NCCL's ``latency + bytes /
bandwidth`` choice but with its own figures (``src/graph/tuning.cc``,
``rcclTuningModel``): base latency 12 / 12 / 17 µs (LL / LL128 / Simple),
and per platform a *tuning model* of hardware latencies per step and
bandwidth ratios per algorithm and protocol, with size-dependent correction
factors for trees (and for rings across nodes). ``src/graph/rome_models.cc``
matches the platform: 8 MI300X (gfx942) fully connected by xGMI get tuning
model 5, a platform it does not match keeps model 0. Ring LL's bandwidth
ratio is 0.08 (model 5) or 0.04 (model 0) of Simple's, where NCCL's is 0.5,
so RCCL leaves LL for Simple near 384 KiB on 8 MI300X where NCCL's model
would wait until a few MiB. The bus bandwidth is channels x the xGMI width
RCCL assumes (``src/graph/topo.h``: 48 GB/s per gfx94x link, 36 for MI200,
24 otherwise). LL128 is off (RCCL enables it only on MI200 platforms whose
model says so), and so is the Simple tree on one gfx94x node.

On 8 MI300X (``rome_model_79``: ``mscclEnabled=1``) RCCL also runs the MSCCL
algorithms it ships in ``tools/msccl-algorithms`` whenever one covers the
call (``mscclSchedulerSelectAlgo`` in ``src/misc/msccl/msccl_lifecycle.cc``:
same rank count and placement, ``count`` a multiple of the algorithm's
``nchunksperloop``, ``minBytes <= bytes <= maxBytes``): its all-pairs
allreduces, which :data:`MSCCL_ALLREDUCE` lists and
:func:`msccl_pick` maps to the library's ``allreduce_allpairs``.

>>> from msccl_py.topologies import load
>>> [rccl_choice("allreduce", s, load("mi300x"))[1] for s in (256 << 10, 512 << 10)]
['LL', 'Simple']
>>> msccl_pick("allreduce", 1 << 20, (1 << 20) // 4, load("mi300x"))
MscclPick(program='allreduce_allpairs', protocol='Simple', instances=8)
"""

from __future__ import annotations

import math
import re
from typing import Any, NamedTuple

from msccl_py.topologies.rings import ring_bandwidth, ring_search

PROTOCOLS = ("LL", "LL128", "Simple")
#: base latency (µs) per protocol, trees and rings alike (baseLat)
BASE_LAT = (12.0, 12.0, 17.0)


class TuningModel(NamedTuple):
    """One ``rcclTuningModel`` entry: hardware latency per step (µs) for xGMI/NVLink, PCI
    and the network, per algorithm (``Tree``/``Ring``) and protocol; bandwidth ratios for
    up to 2 nodes and more; per protocol, correction factors by log2(bytes / 64)."""

    hw_lat: dict
    bw_ratio: dict
    tree_correction: tuple
    ring_correction: tuple


#: tuning_model_0 (the default) and tuning_model_5 (8 MI300X), src/graph/tuning.cc
MODELS = {
    0: TuningModel(
        {"fast": {"Tree": (0.8, 1.4, 2.5), "Ring": (0.8, 2.2, 3.6)},
         "pci": {"Tree": (2.2, 2.2, 5.7), "Ring": (2.2, 2.2, 5.7)},
         "net": {"Tree": (11.8, 18.2, 20.8), "Ring": (9.5, 19.8, 15.1)}},
        ({"Tree": (0.04, 0.22, 0.91), "Ring": (0.04, 0.34, 1.0)},
         {"Tree": (0.04, 0.22, 0.95), "Ring": (0.04, 0.34, 1.0)}),
        ((0.1, 0.2, 0.1, 0.1, 0.9, 0.3, 0.4, 0.1, 0.2, 0.4, 0.2, 0.1, 0.3, 0.3, 0.2, 0.2, 0.2,
          0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1),
         (0.1, 0.3, 1.0, 0.1, 0.5, 1.0, 0.9, 1.0, 1.0, 1.0, 0.3, 0.1, 0.4, 0.5, 0.5, 0.4, 0.4,
          0.3, 0.3, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2),
         (0.2, 1.0, 0.1, 0.1, 0.7, 0.2, 0.4, 0.1, 0.1, 0.3, 0.4, 0.3, 0.6, 0.8, 1.0, 1.0, 1.0,
          1.0, 0.9, 0.8, 0.8, 0.8, 0.8, 0.8, 0.9, 0.9, 0.9)),
        ((0.1, 0.1, 0.1, 0.1, 0.1, 0.2, 0.4, 0.2, 0.3, 0.5, 0.3, 0.1, 0.5, 0.5, 0.3, 0.2, 0.2,
          0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1),
         (0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.3, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.8,
          0.7, 0.5, 0.4, 0.4, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3),
         (1.0, 0.8, 0.2, 1.0, 1.0, 0.3, 1.0, 0.1, 0.1, 0.2, 0.2, 0.1, 0.5, 1.0, 0.8, 0.8, 1.0,
          0.9, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0))),
    5: TuningModel(
        {"fast": {"Tree": (0.9, 0.0, 2.3), "Ring": (0.8, 0.0, 2.1)},
         "pci": {"Tree": (2.2, 2.2, 5.7), "Ring": (2.2, 2.2, 5.7)},
         "net": {"Tree": (10.5, 0.0, 25.0), "Ring": (9.5, 0.0, 320.0)}},
        ({"Tree": (0.06, 0.0, 0.11), "Ring": (0.08, 0.0, 1.0)},
         {"Tree": (0.06, 0.0, 0.59), "Ring": (0.08, 0.0, 1.0)}),
        ((0.1,) * 6 + (1.0, 1.0, 1.0, 1.0, 1.0, 0.6, 1.0, 0.9, 1.0, 1.0) + (0.1,) * 11,
         (0.0,) * 27,
         (0.1,) * 15 + (0.7,) + (1.0,) * 10 + (0.8,)),
        ((0.1,) * 11 + (1.0, 0.2, 1.0, 0.4, 0.4, 0.1, 0.2, 0.2) + (0.1,) * 8,
         (0.0,) * 27,
         (0.1,) * 23 + (0.8, 1.0, 1.0, 1.0))),
}
#: xGMI bandwidth per link RCCL assumes, by architecture (ncclTopoXGMISpeed)
XGMI_WIDTH = {"gfx942": 48.0, "gfx90a": 36.0}
DEFAULT_XGMI_WIDTH = 24.0
#: AMD Instinct models → architecture (gcnArchName)
ARCHS = (("mi300", "gfx942"), ("mi325", "gfx942"), ("mi250", "gfx90a"), ("mi210", "gfx90a"),
         ("mi100", "gfx908"))


class Msccl(NamedTuple):
    """One MSCCL algorithm RCCL ships: its protocol, channels, chunks per loop, size range
    (bytes, inclusive) and placement (``inplace``)."""

    protocol: str
    channels: int
    chunks_per_loop: int
    min_bytes: int
    max_bytes: int
    inplace: bool


#: tools/msccl-algorithms/allreduce-allpairs-8n-*.xml (8 ranks)
MSCCL_ALLREDUCE = (
    Msccl("LL", 4, 256, 0, 65536, False), Msccl("LL", 4, 256, 0, 65536, True),
    Msccl("LL", 8, 512, 65537, 524287, False), Msccl("LL", 8, 512, 65537, 524287, True),
    Msccl("Simple", 8, 512, 524288, 16777216, False),
    Msccl("Simple", 8, 512, 524288, 11534336, True),
    Msccl("Simple", 8, 512, 14680065, 16777216, True),
)


class MscclPick(NamedTuple):
    """The library program that stands for RCCL's MSCCL algorithm, as it runs it."""

    program: str
    protocol: str
    instances: int


def amd_arch(topology: Any) -> str | None:
    """The ``gcnArchName`` of the machine's GPUs when its ``model`` is an AMD Instinct."""
    model = (getattr(topology, "model", None) or "").lower()
    return next((arch for key, arch in ARCHS if re.search(rf"(?<![a-z0-9]){key}", model)),
                None)


def tuning_model(topology: Any) -> int:
    """The tuning model RCCL's platform match gives the machine (5: 8 gfx942 GPUs on one
    node, each linked to every other; 0: anything else)."""
    nodes = getattr(topology, "num_machines", 1) or 1
    n = topology.num_nodes()
    if amd_arch(topology) == "gfx942" and nodes == 1 and n == 8 and all(
            topology.graph.has_edge(a, b) for a in range(n) for b in range(n) if a != b):
        return 5
    return 0


def _fast_link(topology: Any, rings: list[list[int]]) -> tuple[float, bool] | None:
    """(bandwidth of one link, whether it is xGMI) of the rings' first direct hop, None
    when none."""
    g = topology.graph
    for ring in rings:
        for a, b in zip(ring, ring[1:] + ring[:1]):
            if a != b and g.has_edge(a, b) and not g.edges[a, b].get("via"):
                e = g.edges[a, b]
                kind = str(e.get("kind") or "").lower()
                # one link's bandwidth: a pair joined by several links (MI250's x4) counts them
                return (float(e["bw"]) / max(1, int(e.get("count") or 1)),
                        kind.startswith(("xgmi", "infinity")))
    return None


def _bus_bandwidth(topology: Any, rings: list[list[int]]) -> tuple[float, bool]:
    """(channels x the xGMI width RCCL assumes per link, the file's links elsewhere; whether
    the rings run over xGMI, RCCL's fast link class)."""
    bus = ring_bandwidth(topology, rings)
    link = _fast_link(topology, rings)
    if link is None or not link[1]:
        return bus, False
    return bus * XGMI_WIDTH.get(amd_arch(topology), DEFAULT_XGMI_WIDTH) / link[0], True


def rccl_entries(collective: str, nbytes: int, topology: Any,
                 algorithms: tuple[str, ...] = ("Ring", "Tree"),
                 protocols: tuple[str, ...] = PROTOCOLS) -> dict[tuple[str, str],
                                                                 tuple[float, float]]:
    """RCCL's (latency µs, algorithm bandwidth GB/s) of each enabled (algorithm,
    protocol) for one call (the bandwidth with its size corrections applied)."""
    found = ring_search(topology)
    model = MODELS[tuning_model(topology)]
    n = topology.num_nodes()
    nodes = getattr(topology, "num_machines", 1) or 1
    bus, xgmi = _bus_bandwidth(topology, found.rings)
    if nodes > 1:
        # across nodes RCCL's bus bandwidth is its graph search's, as NCCL's: channels x
        # bwIntra up to 2 nodes, x bwInter beyond (src/graph/tuning.cc, ncclTopoTuneModel:
        # ``bw = nNodes <= 2 ? bwIntra : bwInter; busBw = nChannels * bw``), the search
        # bounded by the NICs; the rings' own xGMI figure would price the network twice
        from msccl_py.tuning.nccl_model import ring_graph
        graph = ring_graph(topology)
        bus = graph.channels * (graph.bw_intra if nodes <= 2 else graph.bw_inter)
    single_gfx94 = nodes == 1 and amd_arch(topology) == "gfx942"
    steps = 2 * (n - 1) if collective == "allreduce" else n - 1
    inter = (2 * nodes if nodes > 1 else 0) if collective == "allreduce" else nodes - 1
    log_size = min(max(0, int(math.log2(max(1, nbytes >> 6)))), 26)
    out = {}
    for algo in algorithms:
        if algo == "Tree" and collective != "allreduce":
            continue
        for p, proto in enumerate(PROTOCOLS):
            if proto not in protocols or proto == "LL128":
                continue
            if algo == "Tree" and proto == "Simple" and single_gfx94:
                continue
            bw = bus * model.bw_ratio[0 if nodes <= 2 else 1][algo][p]
            bw *= n / steps if algo == "Ring" else 0.5
            if algo == "Tree":
                bw *= model.tree_correction[p][log_size]
            elif nodes > 1:
                bw *= model.ring_correction[p][log_size]
            if bw <= 0:
                continue
            intra = model.hw_lat["fast" if xgmi else "pci"][algo][p]
            net = model.hw_lat["net"][algo][p]
            if algo == "Ring":
                if nodes > 1:
                    intra = max(intra, 3.0 if proto == "Simple" else 1.0)
                lat = BASE_LAT[p] + (steps - inter) * intra + inter * net
            else:
                lat = BASE_LAT[p] + 2 * ((n // nodes - 1) * intra + int(math.log2(nodes)) * net)
            out[algo, proto] = (lat, bw)
    return out


def rccl_times(collective: str, nbytes: int, topology: Any,
               algorithms: tuple[str, ...] = ("Ring", "Tree"),
               protocols: tuple[str, ...] = PROTOCOLS) -> dict[tuple[str, str], float]:
    """RCCL's predicted time (µs) of each enabled (algorithm, protocol) for one call."""
    return {k: lat + nbytes / (1000 * bw) for k, (lat, bw) in
            rccl_entries(collective, nbytes, topology, algorithms, protocols).items()}


def rccl_choice(collective: str, nbytes: int, topology: Any,
                algorithms: tuple[str, ...] = ("Ring", "Tree"),
                protocols: tuple[str, ...] = PROTOCOLS) -> tuple[str, str]:
    """(algorithm, protocol) RCCL's tuning model picks for one call among those allowed."""
    times = rccl_times(collective, nbytes, topology, algorithms, protocols)
    if not times:
        raise ValueError(f"no algorithm of {algorithms} with a protocol of {protocols} runs "
                         f"{collective} under RCCL")
    return min(times, key=times.get)


def msccl_pick(collective: str, nbytes: int, count: int | None, topology: Any,
               inplace: bool = False) -> MscclPick | None:
    """The MSCCL algorithm RCCL runs a call of ``nbytes`` (``count`` elements) with on
    ``topology``, as a library program; None where it runs its own (ring or tree)."""
    nodes = getattr(topology, "num_machines", 1) or 1
    if (collective != "allreduce" or tuning_model(topology) != 5 or nodes != 1
            or not count or count <= 0):
        return None
    for m in MSCCL_ALLREDUCE:
        if (m.inplace == inplace and count % m.chunks_per_loop == 0
                and m.min_bytes <= nbytes <= m.max_bytes):
            return MscclPick("allreduce_allpairs", m.protocol, m.channels)
    return None
