"""Bandwidth figures for a topology: per-GPU bandwidth, cut and bisection bandwidth.

Traffic between two ranks is limited by its link and by the devices it
crosses: a switch port (each GPU sends at most ``port_bw`` into an NVSwitch
fabric and receives at most that), a switch's total, and the NICs at both ends
for ranks on different machines. A cut's capacity counts each such device
once: the sum, over devices, of min(device bandwidth, the link bandwidth of
the crossing pairs it carries), bounded separately at the sending and the
receiving end (the smaller bound wins). Explicit MSCCLang ``switches`` given
to ``Topology(name, links, switches)`` are not modelled here.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from msccl_py.topologies.topology import Topology

#: exact bisection (all balanced cuts) up to this many ranks
EXACT_LIMIT = 16


@dataclass
class _Groups:
    src: np.ndarray      # pair source rank
    dst: np.ndarray      # pair destination rank
    bw: np.ndarray       # pair link bandwidth
    out_group: list[np.ndarray]   # per family: group id per pair (-1: not limited)
    in_group: list[np.ndarray]
    caps: list[np.ndarray]        # per family: bandwidth of each group


def _groups(topo: Topology) -> _Groups:
    bwm = topo.bandwidth_matrix()
    src, dst = np.nonzero(bwm)
    bw = bwm[src, dst]
    g = topo.graph
    n = topo.num_nodes()
    families_out, families_in, caps = [], [], []
    # switch ports: pairs carried by switch S limited at (S, src) and (S, dst)
    switches = topo.devices("switch")
    if switches:
        via_id = {dev: k for k, dev in enumerate(switches)}
        pair_via = np.full(len(src), -1)
        vias = {(u, v): via_id.get(w) for u, v, w in g.edges(data="via")
                if isinstance(u, int) and isinstance(v, int) and w is not None}
        for k, (s, d) in enumerate(zip(src.tolist(), dst.tolist())):
            sw = vias.get((s, d))
            if sw is not None:
                pair_via[k] = sw
        port = np.array([g.nodes[dev].get("port_bw") or np.inf for dev in switches])
        carried = pair_via >= 0
        families_out.append(np.where(carried, pair_via * n + src, -1))
        families_in.append(np.where(carried, pair_via * n + dst, -1))
        caps.append(np.repeat(port, n))
        total = np.array([g.nodes[dev].get("total_bw") or np.inf for dev in switches])
        if np.isfinite(total).any():
            families_out.append(np.where(carried, pair_via, -1))
            families_in.append(np.full(len(src), -1))
            caps.append(total)
    # NICs: cross-machine pairs limited by the sender's and the receiver's NIC
    if topo.devices("fabric"):
        nics = topo.devices("nic")
        nic_of = np.full(n, -1)
        nic_bw = np.zeros(n)
        for k, dev in enumerate(nics):
            data = g.nodes[dev]
            for r in data["gpus"]:
                if data["bw"] > nic_bw[r]:
                    nic_of[r], nic_bw[r] = k, data["bw"]
        machine = np.array([g.nodes[r].get("node", 0) for r in range(n)])
        remote = machine[src] != machine[dst]
        families_out.append(np.where(remote, nic_of[src], -1))
        families_in.append(np.where(remote, nic_of[dst], -1))
        caps.append(np.array([g.nodes[dev]["bw"] for dev in nics], dtype=float))
    return _Groups(src, dst, bw, families_out, families_in, caps)


def cut_bandwidth(topo: Topology, side: np.ndarray | list[int], *,
                  _g: _Groups | None = None) -> float:
    """GB/s that ranks in ``side`` can send, in total, to all other ranks.

    Each crossing pair starts at its link bandwidth; pairs sharing a sending
    device are scaled down to fit it, then pairs sharing a receiving device.

    >>> from msccl_py.topologies import load
    >>> cut_bandwidth(load("dgx-h100"), [0, 1, 2, 3])
    1800.0
    """
    g = _g or _groups(topo)
    mask = np.zeros((1, topo.num_nodes()), dtype=bool)
    mask[0, np.asarray(side, dtype=int)] = True
    return float(_cuts(g, mask)[0])


def _cuts(g: _Groups, masks: np.ndarray) -> np.ndarray:
    """Cut bandwidth for each row of ``masks`` (K x ranks, True = sending side)."""
    weights = (masks[:, g.src] & ~masks[:, g.dst]) * g.bw          # K x pairs
    for groups in (g.out_group, g.in_group):
        for gid, cap in zip(groups, g.caps):
            sel = np.nonzero(gid >= 0)[0]
            if not len(sel):
                continue
            ids = gid[sel]
            sums = _group_sums(weights[:, sel], ids, len(cap))
            scale = np.minimum(1.0, cap[None, :] / np.where(sums > 0, sums, 1.0))
            weights[:, sel] *= scale[:, ids]
    return np.round(weights.sum(axis=1), 9)


def _group_sums(weights: np.ndarray, ids: np.ndarray, groups: int) -> np.ndarray:
    """[k, g] = sum of weights[k, p] over pairs p with ids[p] == g.

    One matrix product for many small cuts; a bincount per cut for big topologies.
    """
    if len(ids) * groups <= 4_000_000:
        onehot = np.zeros((len(ids), groups))
        onehot[np.arange(len(ids)), ids] = 1.0
        return weights @ onehot
    return np.stack([np.bincount(ids, weights=row, minlength=groups) for row in weights])


@dataclass
class Bisection:
    """Smallest cut found between two halves, and how it was found."""
    bandwidth: float
    side: list[int]
    exact: bool


def bisection(topo: Topology) -> Bisection:
    """Bisection bandwidth (GB/s per direction): the weakest split into halves.

    Exact (every balanced cut) up to :data:`EXACT_LIMIT` ranks; beyond that,
    the smallest of the machine-aligned, in-machine and interleaved splits.

    >>> from msccl_py.topologies import load
    >>> bisection(load("dgx1")).bandwidth
    150.0
    """
    n = topo.num_nodes()
    if n < 2:
        return Bisection(0.0, [], True)
    half = n // 2
    if n <= EXACT_LIMIT:
        sides = np.array(list(itertools.combinations(range(n), half)))
        exact = True
    else:
        per = topo.gpus_per_node
        candidates = [list(range(half)), list(range(0, n, 2))[:half]]
        if topo.num_machines > 1 and per > 1:
            candidates.append([r for r in range(n) if r % per < per // 2][:half])
        sides = np.array(candidates)
        exact = False
    masks = np.zeros((len(sides), n), dtype=bool)
    np.put_along_axis(masks, sides, True, axis=1)
    if exact or not _is_cluster(topo):
        values = _cuts(_groups(topo), masks)
    else:
        values = np.array([cluster_cut(topo, m) for m in masks])
    best = int(np.argmin(values))
    return Bisection(float(values[best]), sides[best].tolist(), exact)


def _is_cluster(topo: Topology) -> bool:
    return (getattr(topo, "num_machines", 1) or 1) > 1 and bool(topo.devices("fabric"))


def cluster_cut(topo: Topology, side: np.ndarray) -> float:
    """:func:`cut_bandwidth` of a cluster of identical machines without its rank pairs:
    the in-machine part once per distinct local side, the network part per (NIC, local
    side) class. The same figure (the NICs scaled as senders, then as receivers), in
    time linear in the ranks.

    >>> from msccl_py.topologies import load
    >>> t = load("dgx-h100", nodes=4)
    >>> side = np.arange(32) < 12
    >>> cluster_cut(t, side) == cut_bandwidth(t, np.nonzero(side)[0])
    True
    """
    from msccl_py.topologies.gpus import first_node
    one = first_node(topo)
    per = one.num_nodes()
    g = topo.graph
    nic_of, nic_bw = {}, {}            # local rank -> its best NIC's local id; id -> GB/s
    names = {}
    for r in range(per):
        nics = topo.nics_of(r)
        if nics:
            best = max(nics, key=lambda v: g.nodes[v]["bw"])
            nic_of[r] = names.setdefault(best, len(names))
            nic_bw[nic_of[r]] = float(g.nodes[best]["bw"])
    patterns: dict[tuple, int] = {}
    for m in range(len(side) // per):
        key = tuple(bool(x) for x in side[m * per:(m + 1) * per])
        patterns[key] = patterns.get(key, 0) + 1
    single = _groups(one)
    intra = sum(c * (_cuts(single, np.array([key]))[0] if any(key) else 0.0)
                for key, c in patterns.items())
    keys = list(patterns)
    nics = sorted(nic_bw)
    send = np.zeros((len(keys), len(nics)))     # [pattern, nic]: GPUs inside on the NIC
    recv = np.zeros((len(keys), len(nics)))     # ... outside
    for p, key in enumerate(keys):
        for r, j in nic_of.items():
            (send if key[r] else recv)[p, nics.index(j)] += 1
    count = np.array([patterns[k] for k in keys], dtype=float)
    bw = np.array([nic_bw[j] for j in nics])
    pair = np.minimum.outer(bw, bw)               # a remote pair's GB/s by its two NICs
    others = count[None, :] - np.eye(len(keys))   # [p, q]: machines of q beside one of p
    # sender NIC (p, j): its GPUs inside times every outside GPU on another machine
    reach = np.einsum("pq,qk,jk->pj", others, recv, pair)
    offered = send * reach
    scale_out = np.where(offered > 0, np.minimum(1.0, bw[None, :] / np.where(
        offered > 0, offered, 1.0)), 0.0)
    # receiver NIC (q, k): what the scaled senders of other machines offer it
    into = recv * np.einsum("qp,pj,pj,jk->qk", others, send, scale_out, pair)
    got = np.minimum(into, bw[None, :])
    return round(float(intra + (count[:, None] * got).sum()), 9)


def diameter(topo: Topology) -> int | None:
    """:meth:`Topology.diameter`; on a cluster, that of three of its machines (or two):
    every cross-machine pair with NICs is one hop and the machines are copies, so a
    shortest path needs no fourth machine (three suffice to alternate through).

    >>> from msccl_py.topologies import load
    >>> diameter(load("ndv2", nodes=8)) == load("ndv2", nodes=8).diameter()
    True
    """
    if not _is_cluster(topo) or topo.num_machines <= 3:
        return topo.diameter()
    from msccl_py.topologies.gpus import first_node
    local = first_node(topo).units_matrix().T > 0
    per = len(local)
    has_nic = np.array([bool(topo.nics_of(r)) for r in range(per)])
    k = 3
    adj = np.kron(np.ones((k, k), dtype=bool) & ~np.eye(k, dtype=bool),
                  np.outer(has_nic, has_nic)) | np.kron(np.eye(k, dtype=bool), local)
    return Topology("diameter", adj.T.astype(float)).diameter()


def gpu_bandwidth(topo: Topology) -> tuple[np.ndarray, np.ndarray]:
    """Per rank: (in-machine send bandwidth, network send bandwidth) in GB/s.

    In-machine: direct links summed, switch-carried links capped at the port.
    Network: each NIC's bandwidth shared evenly by the GPUs on it.

    >>> from msccl_py.topologies import load
    >>> [float(x[0]) for x in gpu_bandwidth(load("ndv2"))]
    [150.0, 1.5625]
    """
    n = topo.num_nodes()
    g = topo.graph
    local = np.zeros(n)
    per_switch: dict[tuple[int, str], float] = {}
    for u, v, data in g.edges(data=True):
        if isinstance(u, int) and isinstance(v, int):
            if data.get("via"):
                key = (u, data["via"])
                per_switch[key] = per_switch.get(key, 0.0) + data["bw"]
            else:
                local[u] += data["bw"]
    for (u, sw), total in per_switch.items():
        port = g.nodes[sw].get("port_bw") if sw in g else None
        local[u] += min(total, port) if port else total
    network = np.zeros(n)
    for dev in topo.devices("nic"):
        data = g.nodes[dev]
        if data.get("bw") and data["gpus"]:
            for r in data["gpus"]:
                network[r] += data["bw"] / len(data["gpus"])
    return local, network


def summary(topo: Topology) -> dict:
    """Headline figures for ``msccl-py topology show``.

    >>> from msccl_py.topologies import load
    >>> summary(load("dgx-a100"))["bisection_gbs"]
    1200.0
    """
    local, network = gpu_bandwidth(topo)
    g = topo.graph
    pairs = sum(1 for u, v in g.edges if isinstance(u, int) and isinstance(v, int))
    cut = bisection(topo)
    from msccl_py.topologies.fabric import of
    fab = of(topo)
    bisect = cut.bandwidth if fab is None else min(cut.bandwidth, fab.bisection_GBps())
    return {
        "name": topo.name,
        "title": topo.title,
        "ranks": topo.num_nodes(),
        "machines": topo.num_machines,
        "gpus_per_machine": topo.gpus_per_node,
        "unit": topo.bandwidth_unit,
        "direct_links": pairs,
        "switches": len(topo.devices("switch")),
        "nics": len(topo.devices("nic")),
        "local_gbs_per_gpu": (float(local.min()), float(local.max())),
        "network_gbs_per_gpu": (float(network.min()), float(network.max())),
        "bisection_gbs": bisect,
        "bisection_exact": cut.exact,
        "fabric": fab.describe() if fab is not None else [],
        "diameter": diameter(topo),
    }
