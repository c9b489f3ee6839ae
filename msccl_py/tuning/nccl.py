"""NCCL's own choice of algorithm and protocol per size, from its tuning model.

NCCL times every (algorithm, protocol) pair as ``latency + bytes / bandwidth``
and runs the fastest. Latency is a base per pair plus a per-step hardware
latency (NVLink, PCIe or network), over 2(n-1) ring steps for allreduce, n-1
for allgather and reduce-scatter, or twice the tree depth. Bandwidth is the
rings' bus bandwidth, cut for LL (a quarter for allreduce, a third
otherwise) and LL128 (0.92, and at most a per-channel ceiling), and for the
tree by 0.9 and a cap. The figures are those of NCCL's ``tuning.cc``; LL128
is enabled only over NVLink, as NCCL does by default. The tuner uses this to
compare against "what NCCL would run", not against the best NCCL program.

>>> from msccl_py.topologies import load
>>> [nccl_choice("allreduce", s, load("dgx-a100"))[1] for s in (1 << 10, 1 << 22, 1 << 30)]
['LL', 'LL128', 'Simple']
"""

from __future__ import annotations

import math
from typing import Any

from msccl_py.tuning.rings import find_rings, ring_share

PROTOCOLS = ("LL", "LL128", "Simple")
#: base latency (µs) per algorithm and protocol
BASE_LAT = {"Tree": (4.4, 4.4, 0.0), "Ring": (3.6, 10.0, 8.4)}
#: hardware latency (µs) per step: link kind → algorithm → protocol
HW_LAT = {"nvlink": {"Tree": (0.52, 1.2, 28.0), "Ring": (0.47, 1.9, 3.4)},
          "pci": {"Tree": (1.0, 1.9, 28.0), "Ring": (1.0, 2.5, 5.7)},
          "net": {"Tree": (5.0, 8.5, 50.0), "Ring": (2.7, 4.0, 9.6)}}
#: LL128 ceiling per channel (GB/s) by collective
LL128_MAX_PER_CHANNEL = {"allgather": 18.3, "reduce_scatter": 15.2, "allreduce": 16.7}


def _hardware(kind: str) -> str:
    """NCCL's latency class of a link kind; xGMI counts as NVLink (RCCL's fast-link class)."""
    return "nvlink" if kind.startswith(("nvlink", "xgmi")) else "pci"


def nccl_times(collective: str, nbytes: int, topology: Any) -> dict[tuple[str, str], float]:
    """NCCL's predicted time (µs) of each enabled (algorithm, protocol) for one call."""
    rings = find_rings(topology)
    n = topology.num_nodes()
    nodes = getattr(topology, "num_machines", 1) or 1
    a, b = rings[0][0], rings[0][1]
    edge = topology.graph.edges[a, b]
    bus = ring_share(topology, rings) * float(edge["bw"]) / topology.link(a, b)
    channels = len(rings)
    kind = str(edge.get("kind") or "")
    hw, nvlink = _hardware(kind), kind.startswith("nvlink")
    steps = 2 * (n - 1) if collective == "allreduce" else n - 1
    inter = (2 if collective == "allreduce" else 1) * (nodes - 1)
    out = {}
    for algo in ("Ring", "Tree") if collective == "allreduce" else ("Ring",):
        for p, proto in enumerate(PROTOCOLS):
            if proto == "LL128" and not nvlink:
                continue
            bw = bus
            if algo == "Ring" and proto == "LL":
                bw *= 1 / 4 if (nodes > 1 or collective == "allreduce") else 1 / 3
            if algo == "Ring" and proto == "LL128":
                bw = min(bw * 0.92, LL128_MAX_PER_CHANNEL[collective] * channels)
            if algo == "Tree":
                bw = min(bw * 0.9, 110.0 if nodes <= 2 else 80.0)
                bw *= {"LL": 1 / 3.8, "LL128": 7 / 9, "Simple": 1.0}[proto]
            algbw = bw * (n / steps if algo == "Ring" else 0.5)
            intra = HW_LAT[hw][algo][p] * (1.8 if nodes > 1 and proto == "LL" else 1.0)
            net = HW_LAT["net"][algo][p]
            if algo == "Ring":
                lat = BASE_LAT[algo][p] + (steps - inter) * intra + inter * net
            else:
                lat = BASE_LAT[algo][p] + 2 * ((n // nodes - 1) * intra
                                               + math.log2(nodes) * net)
            out[algo, proto] = lat + nbytes / (1000 * algbw)
    return out


def nccl_choice(collective: str, nbytes: int, topology: Any) -> tuple[str, str]:
    """(algorithm, protocol) NCCL's model picks for one call of ``nbytes``."""
    times = nccl_times(collective, nbytes, topology)
    return min(times, key=times.get)
