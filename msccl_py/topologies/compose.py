"""Build Topology graphs from machine specs, one machine or N copies as a cluster.

Each copy gets its ranks offset by ``node * gpus``, its own switch and NIC
nodes (named ``NAME`` for one machine, ``NAME@node`` in a cluster), and in a
cluster every NIC joins one ``network`` fabric node. Cross-node rank pairs are
not stored as edges (a 1,024-GPU cluster would need a million); the Topology
derives them from the NICs.
"""

from __future__ import annotations


import dataclasses

from msccl_py.topologies.topofile import MachineSpec, NicSpec, Where
from msccl_py.topologies.topology import Topology


def first_gpus(machine: MachineSpec, gpus: int, nics: list[NicSpec] | None = None,
               where: Where | None = None) -> tuple[MachineSpec, list[NicSpec] | None]:
    """``machine`` cut to its GPUs ``0..gpus-1`` (a launch that runs fewer ranks per host than
    the machine has GPUs), with ``nics`` (a cluster's placement) cut alike.

    Links and switch ports of the other GPUs go; a NIC keeps the GPUs it still
    serves. Where no NIC serves any of them, the first NIC serves them all, so
    the hosts can still talk.

    >>> from msccl_py.topologies.topofile import parse_text
    >>> m = parse_text("machine m { gpus 4 linktype l 25 GB/s link 0 <-> 1 l link 2 <-> 3 l "
    ...                "nic a 12.5 GB/s gpus 2-3 }")["m"]
    >>> cut, _ = first_gpus(m, 2)
    >>> cut.gpus, sorted(cut.edges), [(n.name, n.gpus) for n in cut.nics]
    (2, [(0, 1), (1, 0)], [('a', [0, 1])])
    """
    at = where or machine.where
    if not isinstance(gpus, int) or isinstance(gpus, bool) or not 1 <= gpus <= machine.gpus:
        raise at.error(f"machine '{machine.name}' has {machine.gpus} GPUs; cannot use "
                       f"{gpus!r} of them per node")
    if gpus == machine.gpus:
        return machine, nics

    def cut(placement: list[NicSpec]) -> list[NicSpec]:
        kept = [dataclasses.replace(n, gpus=[g for g in n.gpus if g < gpus])
                for n in placement]
        kept = [n for n in kept if n.gpus]
        if not kept and placement:
            kept = [dataclasses.replace(placement[0], gpus=list(range(gpus)))]
        return kept

    switches = [dataclasses.replace(sw, gpus=[g for g in sw.gpus if g < gpus])
                for sw in machine.switches]
    small = dataclasses.replace(
        machine, name=f"{machine.name}:{gpus}", gpus=gpus,
        title=f"{machine.title or machine.name}, GPUs 0-{gpus - 1}",
        edges={k: e for k, e in machine.edges.items() if e.src < gpus and e.dst < gpus},
        switches=[sw for sw in switches if len(sw.gpus) > 1], nics=cut(machine.nics),
        places={g: p for g, p in machine.places.items() if g < gpus})
    return small, (cut(nics) if nics is not None else None)


def build(machine: MachineSpec, nodes: int = 1, *, name: str | None = None,
          nics: list[NicSpec] | None = None, network_bw: float | None = None,
          network_latency: float | None = None, title: str | None = None,
          source: str | None = None, where: Where | None = None,
          network_kind: str | None = None, fabric=None) -> Topology:
    """Topology of ``nodes`` copies of ``machine``.

    ``nics`` replaces the machine's NIC placement; ``network_bw`` (GB/s)
    overrides every NIC's bandwidth; ``network_kind`` (a cluster's) replaces
    the machine's NIC network kind. The network latency is ``network_latency``,
    else the machine's own, else the kind's default (:mod:`.networks`).
    ``fabric`` (a :class:`~msccl_py.topologies.fabric.FabricSpec`) wires the NICs as a
    leaf/spine tree: NIC *i* of the placement is rail *i*, at the fabric's rail speed if it
    gives one.

    >>> from msccl_py.topologies.topofile import parse_text
    >>> m = parse_text("machine m { gpus 2 linktype l 25 GB/s link 0 <-> 1 l "
    ...                "nic ib 12.5 GB/s gpus 0-1 }")["m"]
    >>> t = build(m, nodes=2)
    >>> t.num_nodes(), t.link(0, 3), t.bandwidth(0, 3)
    (4, 0.5, 12.5)
    """
    at = where or machine.where
    if not isinstance(nodes, int) or nodes < 1:
        raise at.error(f"node count must be a positive integer, got {nodes!r}")
    placement = machine.nics if nics is None else nics
    for nic in placement:
        bad = [g for g in nic.gpus if g >= machine.gpus]
        if bad:
            raise at.error(f"NIC '{nic.name}' names GPU {bad[0]}, but machine "
                           f"'{machine.name}' has GPUs 0..{machine.gpus - 1}")
    if nodes > 1 and not placement:
        raise at.error(f"machine '{machine.name}' declares no NICs, so {nodes} copies cannot "
                       f"talk; add 'nic NAME BW gpus ...' to the machine or the cluster")
    unit_bw = machine.unit_bw()
    gpus = machine.gpus
    bad_rail = [i for i in (fabric.rails if fabric is not None else ()) if i >= len(placement)]
    if bad_rail:
        raise at.error(f"fabric sets rail {bad_rail[0]}, but machine '{machine.name}' has "
                       f"{len(placement)} NICs (rails 0..{len(placement) - 1})")
    rail_bw = [network_bw if network_bw is not None else _rail_speed(fabric, i, nic.bw)
               for i, nic in enumerate(placement)]
    import networkx as nx
    graph = nx.DiGraph(name=name or machine.name, threadblock_bw=machine.threadblock_bw,
                       memory_bw=machine.memory_bw, protocols=dict(machine.protocols),
                       protocol_threadblock=dict(machine.protocol_threadblock),
                       launch_us=machine.launch_us, bandwidth_scale=machine.bandwidth_scale,
                       bandwidth_shares=dict(machine.bandwidth_shares),
                       msccl=dict(machine.msccl),
                       launch_overlapped=machine.launch_overlapped,
                       nvls_step_us=machine.nvls_step_us)
    edges = list(machine.edges.values())
    unitless = unit_bw is None
    for k in range(nodes):
        off = k * gpus
        tag = f"@{k}" if nodes > 1 else ""
        graph.add_nodes_from(
            (off + i, {"kind": "gpu", "node": k, "local": i, "label": f"GPU{i}",
                       "pos": machine.places.get(i)})
            for i in range(gpus))
        graph.add_edges_from(
            (off + e.src, off + e.dst,
             {"count": e.count, "bw": e.count if unitless else e.bw, "kind": e.kind,
              "latency": e.latency, "via": (e.via + tag) if e.via else None})
            for e in edges)
        for sw in machine.switches:
            dev = sw.name + tag
            members = [off + g for g in sw.gpus]
            graph.add_node(dev, kind="switch", node=k, gpus=members, count=sw.count,
                           link=sw.kind, port_bw=sw.count if unitless else sw.port_bw,
                           total_bw=sw.total_bw)
            graph.add_edges_from((g, dev, {"kind": "attach"}) for g in members)
            graph.add_edges_from((dev, g, {"kind": "attach"}) for g in members)
        for rail, nic in enumerate(placement):
            dev = nic.name + tag
            members = [off + g for g in nic.gpus]
            graph.add_node(dev, kind="nic", node=k, gpus=members, rail=rail,
                           bw=rail_bw[rail])
            graph.add_edges_from((g, dev, {"kind": "attach"}) for g in members)
            graph.add_edges_from((dev, g, {"kind": "attach"}) for g in members)
    kind, network_latency = _network(machine, network_kind, network_latency)
    if nodes > 1:
        if fabric is not None:
            from msccl_py.topologies.fabric import Fabric
            graph.graph["fabric"] = Fabric(fabric, nodes, rail_bw)
        graph.add_node("network", kind="fabric", node=None, latency=network_latency,
                       network=kind, wiring=fabric.kind if fabric is not None else "flat")
        for dev in [v for v, kind in graph.nodes(data="kind") if kind == "nic"]:
            graph.add_edge(dev, "network", kind="attach")
            graph.add_edge("network", dev, kind="attach")
    if unitless and nodes > 1:
        raise at.error(f"machine '{machine.name}' gives no bandwidths, so NIC bandwidths "
                       f"cannot be compared with its links; declare link bandwidths")
    label = machine.title or machine.name
    topo = Topology.from_graph(
        name or (machine.name if nodes == 1 else f"{machine.name}x{nodes}"), graph,
        unit_bw=unit_bw, title=title or (label if nodes == 1 else f"{nodes} x {label}"),
        source=source, machine=machine.name, num_machines=nodes)
    topo.model = machine.model
    topo.cpu_vendor = machine.cpu
    topo.gpus_per_node = gpus
    topo.network_kind = kind
    return topo


def _network(machine: MachineSpec, kind: str | None,
             latency: float | None) -> tuple[str | None, float | None]:
    """(network kind, per-hop latency µs) of a cluster of ``machine``: an explicit latency wins,
    then the machine's own (when the cluster keeps its kind), then the kind's default."""
    from msccl_py.topologies.networks import default_latency
    if kind is None or kind == machine.network_kind:
        kind = machine.network_kind
        if latency is None:
            latency = machine.network_latency
    return kind, latency if latency is not None else default_latency(kind)


def _rail_speed(fabric, rail: int, nic_bw: float) -> float:
    """GB/s of rail ``rail``'s NIC: the fabric's figure for it, else the machine's."""
    if fabric is None:
        return nic_bw
    return fabric.rails.get(rail, fabric.rail_bw if fabric.rail_bw is not None else nic_bw)
