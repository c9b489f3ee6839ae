"""NCCL-style rings from machine files: distinct links where the fabric is point to point."""

from __future__ import annotations

import doctest
from collections import Counter
from pathlib import Path

import pytest

from msccl_py.errors import ProgramError, TopologyError
from msccl_py.topologies import fully_connected, load, loads
from msccl_py.topologies import rings as rings_module
from msccl_py.topologies.rings import (find_rings, program_rings, ring_bandwidth, ring_search,
                                       ring_share)


def _arcs(rings):
    return Counter((r[i], r[(i + 1) % len(r)]) for r in rings for i in range(len(r)))


def test_fully_connected_xgmi_uses_all_seven_links_of_each_gpu():
    topo = load("mi300x")
    rings = find_rings(topo)
    assert len(rings) == 7
    assert all(sorted(r) == list(range(8)) for r in rings)
    arcs = _arcs(rings)
    assert len(arcs) == 56 and set(arcs.values()) == {1}  # every directed link once
    assert ring_share(topo, rings) == 7.0


def test_dgx1_rings_respect_link_multiplicity():
    topo = load("dgx1")
    rings = find_rings(topo)
    assert len(rings) == 6  # six NVLinks per V100
    for (a, b), uses in _arcs(rings).items():
        assert 0 < uses <= topo.link(a, b), (a, b)
    assert ring_share(topo, rings) == 6.0


def test_switch_rings_share_one_order_and_the_port():
    topo = load("dgx-a100")
    rings = find_rings(topo)
    assert len(rings) == 12 and all(r == list(range(8)) for r in rings)
    assert ring_share(topo, rings) == 12.0
    # fewer rings than port units: each ring may use more of the port, the total is the same
    assert ring_share(topo, rings[:4]) == 12.0


def test_cluster_rings_leave_each_node_through_different_gpus():
    topo = load("ndv5", nodes=2)
    rings = find_rings(topo, 4)
    exits = {next(r[i] for i in range(16) if r[i] // 8 != r[(i + 1) % 16] // 8) for r in rings}
    assert len(exits) == 4


def test_a_machine_without_a_hamiltonian_ring_is_an_error():
    star = loads("machine star { gpus 4 linktype l 10 GB/s link 0 <-> 1 l "
                 "link 0 <-> 2 l link 0 <-> 3 l }")
    with pytest.raises(TopologyError, match="no ring through all 4 ranks over its links"):
        find_rings(star)


def test_program_rings_checks_the_rank_count():
    with pytest.raises(ProgramError, match="has 8 ranks, the program 4"):
        program_rings(4, "mi300x")
    topo, rings = program_rings(3, None, None, 5)
    assert len(rings) == 5 and topo.num_nodes() == 3  # two rings found, repeated


def test_four_ranks_share_links_to_use_them_all():
    # the complete digraph on 4 vertices has no decomposition into 3 Hamiltonian cycles, so
    # NCCL's search halves the speed: six rings, two on every link, use all three links
    rings = find_rings(fully_connected(4))
    assert len(rings) == 6 and set(_arcs(rings).values()) == {2}
    assert ring_share(fully_connected(4), rings) == 3.0


DATA = Path(__file__).resolve().parents[1] / "programs" / "data"


@pytest.mark.parametrize("machine,rings,speed", [
    ("dgx-a100", 12, 20.0),   # 6 rings at SM80's 40 GB/s, doubled (ncclTopoDupChannels)
    ("dgx-h100", 12, 30.0),   # 6 rings at sm90's 60 GB/s, doubled
    ("hgx-h200", 12, 30.0),
    ("dgx1", 6, 20.0),        # one ring per V100 NVLink at 20 GB/s: not doubled (< 25)
    ("dgx2", 6, 20.0)])       # 3 rings at 40 over 6 x 20 GB/s, doubled
def test_nvidia_machines_get_nccl_channel_counts(machine, rings, speed):
    found = ring_search(load(machine))
    assert (len(found.rings), found.speed) == (rings, speed)


def test_bridged_boxes_get_rings_over_the_slower_bridges():
    topo = load(DATA / "bridged_boxes.topo")
    rings = find_rings(topo)
    assert len(rings) == 2
    for ring in rings:
        hops = list(zip(ring, ring[1:] + ring[:1]))
        assert all(topo.link(a, b) > 0 for a, b in hops)
        assert sum((a < 4) != (b < 4) for a, b in hops) == 2    # out over one bridge, back
    # one ring per bridge direction: the bridges carry 10 GB/s each way
    assert ring_bandwidth(topo, rings) == pytest.approx(20.0)


@pytest.mark.parametrize("name", ["switch_and_pairs", "split_switches"])
def test_rings_use_direct_links_and_switch_paths_where_each_exists(name):
    topo = load(DATA / f"{name}.topo")
    rings = find_rings(topo)
    g = topo.graph
    for ring in rings:
        hops = list(zip(ring, ring[1:] + ring[:1]))
        assert all(g.has_edge(a, b) for a, b in hops)
        # the fast NVLink pairs carry half of every ring's hops
        assert sum(not g.edges[a, b].get("via") for a, b in hops) == 4
    assert ring_bandwidth(topo, rings) == pytest.approx(32.0)   # each GPU's x16 port, twice


def test_a_direct_link_beats_the_switch_for_its_pair():
    topo = load(DATA / "switch_and_pairs.topo")
    assert topo.graph.edges[0, 1].get("via") is None and topo.graph.edges[0, 2]["via"] == "pcie"
    assert topo.bandwidth(0, 1) == 56.0 and topo.bandwidth(0, 2) == 16.0


def test_cluster_rings_cross_each_node_in_one_piece():
    topo = load("dgx1", nodes=2)
    for ring in find_rings(topo):
        nodes = [r // 8 for r in ring]
        assert sum(a != b for a, b in zip(nodes, nodes[1:] + nodes[:1])) == 2
        inside = [(a, b) for a, b in zip(ring, ring[1:] + ring[:1]) if a // 8 == b // 8]
        assert all(topo.link(a, b) >= 1 for a, b in inside)      # NVLinks inside a node


def test_docstring_examples():
    result = doctest.testmod(rings_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
