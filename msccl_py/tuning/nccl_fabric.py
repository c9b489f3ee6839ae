"""How far a cluster's leaf/spine fabric slows NCCL's inter-node rings and trees.

NCCL's tuning model prices the network by the NICs alone; on an
oversubscribed fabric the uplinks above a leaf can be busier than any NIC.
Whether they are depends on which machines NCCL makes neighbours, and NCCL
joins its channels across nodes in the communicator's node order (node *k*
is the *k*-th machine in rank order), which the cluster's ``placement``
(:mod:`msccl_py.topologies.fabric`) maps onto leaf groups:

* **Ring**: node *k* sends to node *k+1* (mod nodes) on every channel
  (``connectRings``, ``src/graph/connect.cc``, NVIDIA/nccl 5067397c): each
  NIC's ring traffic crosses one edge, weight 1 (one NIC's worth).
* **Tree, NVLSTree**: NCCL's double binary tree over the nodes
  (``ncclGetDtree``, ``src/graph/trees.cc``; ``connectTrees`` and
  ``connectNvls`` in connect.cc), channels alternating between the two trees;
  an allreduce sends each tree's half of the data up every edge (reduce) and
  down it (broadcast): weight 1/2 each way per edge, so an inner node of one
  tree and leaf of the other sends 2, as NCCL's model prices it (a tree's
  algorithm bandwidth is half its bus bandwidth). The traffic is taken as
  spread evenly over the rails.

In a fluid model every edge of a pipelined ring or tree moves at the pace of
its slowest resource, so the share of its NIC bandwidth a node can use is
``min(1, busiest NIC load / busiest uplink's load per capacity)``
(:meth:`~msccl_py.topologies.fabric.Fabric.leaf_utilization`). With uplinks
at full bisection (``oversubscription 1``) that is always 1: a group's
uplinks carry what its NICs can send. PAT (one GPU per node) is not modelled:
it runs at the NICs' pace here.

* **P2P** (alltoall, NCCL's send/receive to every peer): every node sends each
  other node an equal share, so a group of ``m`` of ``n`` machines sends
  ``(n - m) / (n - 1)`` of its NICs' traffic up, whatever the placement
  (:meth:`~msccl_py.topologies.fabric.Fabric.all_to_all_utilization`); NCCL's
  PXN keeps it on the destination's rail.
"""

from __future__ import annotations

import weakref
from typing import Any

_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def btree_parent(nranks: int, rank: int) -> int:
    """``ncclGetBtree``'s parent of ``rank`` (-1 for the root, rank 0).

    >>> [btree_parent(8, r) for r in range(8)]
    [-1, 2, 4, 2, 0, 6, 4, 6]
    """
    if rank == 0:
        return -1
    bit = 1
    while bit < nranks and not bit & rank:
        bit <<= 1
    up = (rank ^ bit) | (bit << 1)
    return rank ^ bit if up >= nranks else up


def tree_parents(nodes: int) -> tuple[list[int], list[int]]:
    """Each node's parent in NCCL's two trees (``ncclGetDtree``): the binary tree, and
    its mirror (even node counts) or the tree shifted by one (odd)."""
    first = [btree_parent(nodes, k) for k in range(nodes)]
    second = []
    for k in range(nodes):
        if nodes % 2:
            u = btree_parent(nodes, (k - 1) % nodes)
            second.append(-1 if u == -1 else (u + 1) % nodes)
        else:
            u = btree_parent(nodes, nodes - 1 - k)
            second.append(-1 if u == -1 else nodes - 1 - u)
    return first, second


def pattern(algo: str, nodes: int) -> list[tuple[int, int, float]]:
    """The inter-node edges ``(node a, node b, weight)`` of ``algo`` (Ring, Tree, NVLSTree),
    weights in NIC bandwidths (module doc)."""
    if nodes < 2:
        return []
    if algo == "Ring":
        return [(k, (k + 1) % nodes, 1.0) for k in range(nodes)]
    edges = []
    for parents in tree_parents(nodes):
        for k, p in enumerate(parents):
            if p >= 0:
                edges += [(k, p, 0.5), (p, k, 0.5)]
    return edges


def fabric_share(topology: Any, algo: str) -> tuple[float, str]:
    """(share of its NIC bandwidth each node's inter-node traffic of ``algo`` can reach,
    the leaf uplink that sets it): (1.0, "") on one machine, a flat network, a
    non-limiting fabric, or an algorithm not modelled."""
    if algo not in ("Ring", "Tree", "NVLSTree", "P2P"):
        return 1.0, ""
    from msccl_py.topologies.fabric import of
    fab = of(topology)
    if fab is None or fab.spec.kind == "flat" or fab.groups < 2:
        return 1.0, ""
    key = algo if algo in ("Ring", "P2P") else "Tree"
    per = _CACHE.setdefault(fab, {})       # per Fabric: a new placement is a new one
    if key == "P2P" and key not in per:
        util, leaf = fab.all_to_all_utilization()
        per[key] = (1.0, "") if util <= 1.0 else (1.0 / util, leaf)
    if key not in per:
        edges = pattern(key, fab.machines)
        util, leaf = fab.leaf_utilization(edges)
        out, into = [0.0] * fab.machines, [0.0] * fab.machines
        for a, b, w in edges:
            out[a] += w
            into[b] += w
        nic = max(max(out), max(into))
        per[key] = (1.0, "") if util <= nic else (nic / util, leaf)
    return per[key]
