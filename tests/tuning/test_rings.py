"""NCCL-style rings from machine files: distinct links where the fabric is point to point."""

from __future__ import annotations

from collections import Counter

import pytest

from msccl_py.errors import ProgramError, TopologyError
from msccl_py.topologies import fully_connected, load, loads
from msccl_py.tuning.rings import find_rings, program_rings, ring_share


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
    with pytest.raises(TopologyError, match="no ring through all 4 ranks"):
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
