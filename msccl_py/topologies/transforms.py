"""Topology transformations from MSCCLang: reverse the links, keep only connectivity."""

from __future__ import annotations

from msccl_py.topologies.topology import Topology


def reverse_topology(topo: Topology) -> Topology:
    """Every link and switch with its direction flipped.

    >>> reverse_topology(Topology("t", [[0, 0], [3, 0]])).links
    [[0, 3], [0, 0]]
    """
    units = topo.units_matrix().T
    links = units.astype(int).tolist() if (units == units.round()).all() else units.tolist()
    switches = [(list(dsts), list(srcs), bw, f"{name}_reversed")
                for srcs, dsts, bw, name in topo.switches]
    return Topology(f"Reverse{topo.name}", links, switches,
                    unit_bw=topo.unit_bw if topo.bandwidth_unit == "GB/s" else None)


def binarize_topology(topo: Topology) -> Topology:
    """Links become 1 where any exist; switches are dropped (connectivity only).

    >>> binarize_topology(Topology("t", [[0, 2], [5, 0]])).links
    [[0, 1], [1, 0]]
    """
    links = (topo.units_matrix() > 0).astype(int).tolist()
    return Topology(f"Binarized{topo.name}", links, [])
