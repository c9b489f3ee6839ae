"""A machine as a capacitated digraph: one edge per resource the performance model shares.

Every resource that ``msccl_py.simulate`` lets transfers share becomes exactly
one edge, so a set of ranks' egress in this graph is what the simulator can
move out of them:

* a direct link ``u -> v``: the edge ``u -> v`` (its bandwidth);
* a switch: GPU ``g -> (switch, "in")`` is g's port out, ``(switch, "out") -> g``
  its port in; with a ``total`` the edge ``(switch, "in") -> (switch, "out")``
  carries it, else the two are one node;
* a cluster's NICs: ``g -> (nic, "out")`` and ``(nic, "in") -> g`` are
  unbounded (the GPU reaches its NIC freely), ``(nic, "out") -> fabric`` is
  the NIC's sending side and ``fabric -> (nic, "in")`` its receiving side.
  A GPU uses its fastest NIC, as the simulator's routes do.
  With a leaf/spine fabric the NICs meet on their ``("leaf", group, rail)`` node
  instead, and leaves reach each other through ``("spine", ...)`` (and
  ``("core", c)``) nodes, each leaf-spine edge a spine's share of the leaf's uplinks.

Device nodes (switches, NICs, the fabric) are free to sit on either side of a
cut: only ranks count as "inside". Edges without ``capacity`` are unbounded
(networkx's convention).

>>> from msccl_py.topologies import load
>>> g = flow_graph(load("dgx-a100"))
>>> g.edges[0, ("nvswitch", "in")]["capacity"]
300.0
"""

from __future__ import annotations

import networkx as nx

from msccl_py.errors import TopologyError

FABRIC = ("network", "fabric")


def flow_graph(topo) -> nx.DiGraph:
    """The resource graph of ``topo`` (see the module docstring); ranks are the int nodes."""
    if topo.bandwidth_unit != "GB/s":
        raise TopologyError(f"topology '{topo.name}' gives link counts, not bandwidths; a "
                            f"bandwidth bound needs link types with a bandwidth "
                            f"(e.g. 'linktype nvlink 25 GB/s')")
    src = topo.graph
    out = nx.DiGraph(name=topo.name)
    out.add_nodes_from(range(topo.num_nodes()))
    for u, v, data in src.edges(data=True):
        if isinstance(u, int) and isinstance(v, int) and not data.get("via"):
            _add(out, u, v, float(data["bw"]))
    for dev in topo.devices("switch"):
        _switch(out, src, dev)
    if topo.devices("fabric"):
        _nics(out, topo)
        from msccl_py.topologies.fabric import representative_machines
        per = topo.gpus_per_node
        out.graph["sinks"] = [m * per + i for m in representative_machines(topo)
                              for i in range(per)]
    return out


def sinks_of(graph: nx.DiGraph) -> list[int]:
    """The ranks a max-flow bound must reach: every rank, or on a cluster of identical
    machines one per kind (:func:`~msccl_py.topologies.fabric.representative_machines`)."""
    ranks = graph.graph.get("sinks")
    return list(ranks) if ranks is not None else ranks_of(graph)


def _add(g: nx.DiGraph, u, v, cap: float) -> None:
    if g.has_edge(u, v):
        g.edges[u, v]["capacity"] += cap
    else:
        g.add_edge(u, v, capacity=cap)


def _switch(out: nx.DiGraph, src: nx.DiGraph, dev) -> None:
    data = src.nodes[dev]
    port = data.get("port_bw")
    if port is None:  # a switch without a port figure: each pair at its own bandwidth
        port = max((d["bw"] for u, v, d in src.edges(data=True) if d.get("via") == dev),
                   default=0.0)
    total = data.get("total_bw")
    into, outof = (dev, "in"), ((dev, "out") if total else (dev, "in"))
    if total:
        _add(out, into, outof, float(total))
    for g in data["gpus"]:
        _add(out, g, into, float(port))
        _add(out, outof, g, float(port))


def _nics(out: nx.DiGraph, topo) -> None:
    from msccl_py.topologies.fabric import of
    g = topo.graph
    fab = of(topo)
    if fab is not None and fab.spec.kind != "flat":
        _leaf_spine(out, fab)
    for rank in range(topo.num_nodes()):
        nics = topo.nics_of(rank)
        if not nics:
            continue
        best = max(nics, key=lambda v: g.nodes[v]["bw"])
        bw = float(g.nodes[best]["bw"])
        if (best, "out") not in out:
            hub = FABRIC
            if fab is not None and fab.spec.kind != "flat":
                hub = ("leaf", fab.group_of(g.nodes[best]["node"]), g.nodes[best].get("rail", 0))
            out.add_edge((best, "out"), hub, capacity=bw)
            out.add_edge(hub, (best, "in"), capacity=bw)
        out.add_edge(rank, (best, "out"))
        out.add_edge((best, "in"), rank)


def _leaf_spine(out: nx.DiGraph, fab) -> None:
    """A leaf/spine(/core) fabric (:mod:`msccl_py.topologies.fabric`): each leaf's uplinks
    spread evenly over its spines, each spine's over the cores, both ways."""
    three = fab.spec.kind == "three-tier"
    for group in range(fab.groups):
        pod = fab.pod_of(group)
        for rail in range(fab.rails):
            leaf = ("leaf", group, rail)
            share = fab.leaf_up(group, rail) / fab.spec.spines
            for s in range(fab.spec.spines):
                spine = ("spine", pod, s) if three else ("spine", s)
                out.add_edge(leaf, spine, capacity=share)
                out.add_edge(spine, leaf, capacity=share)
    if three:
        for pod in range(fab.pods):
            share = fab.spine_bw(pod) / fab.spec.cores
            for s in range(fab.spec.spines):
                for c in range(fab.spec.cores):
                    out.add_edge(("spine", pod, s), ("core", c), capacity=share)
                    out.add_edge(("core", c), ("spine", pod, s), capacity=share)


def ranks_of(graph: nx.DiGraph) -> list[int]:
    """The rank nodes of a flow graph, in order."""
    return sorted(v for v in graph.nodes if isinstance(v, int))
