"""Per-GPU, cut and bisection bandwidth."""

import itertools

import numpy as np
import pytest

from msccl_py.topologies import Topology, load, ring
from msccl_py.topologies.analysis import bisection, cut_bandwidth, gpu_bandwidth, summary


def brute_force_bisection(topo):
    """Reference for point-to-point topologies: sum of crossing link bandwidths."""
    bw = topo.bandwidth_matrix()
    n = topo.num_nodes()
    best = None
    for side in itertools.combinations(range(n), n // 2):
        a = np.zeros(n, dtype=bool)
        a[list(side)] = True
        value = bw[np.ix_(a, ~a)].sum()
        best = value if best is None else min(best, value)
    return best


@pytest.mark.parametrize("name", ["dgx1", "mi250", "mi300x", "amd4", "amd8"])
def test_point_to_point_bisection_matches_brute_force(name):
    t = load(name)
    assert bisection(t).bandwidth == pytest.approx(brute_force_bisection(t))
    assert bisection(t).exact


def test_known_bisections():
    assert bisection(load("dgx1")).bandwidth == 150.0     # 50+25+50+25 between the sockets
    assert bisection(load("dgx-a100")).bandwidth == 4 * 300.0
    assert bisection(ring(8)).bandwidth == 2


def test_switch_port_caps_the_cut():
    t = load("dgx-h100")
    assert cut_bandwidth(t, [0]) == 450.0                  # not 7 x 450
    assert cut_bandwidth(t, range(7)) == 450.0             # receiver port limits too


def test_nics_cap_cross_node_cuts():
    t = load("dgx-h100", nodes=2)
    assert cut_bandwidth(t, range(8)) == 8 * 50.0
    assert cut_bandwidth(t, [0, 8]) == 2 * 450.0 + 0.0 or cut_bandwidth(t, [0, 8]) > 0


def test_large_cluster_bisection_uses_candidate_cuts():
    t = load("dgx-h100", nodes=32)
    b = bisection(t)
    assert not b.exact and b.bandwidth == 16 * 8 * 50.0


def test_gpu_bandwidth():
    local, net = gpu_bandwidth(load("dgx1"))
    np.testing.assert_array_equal(local, 150.0)
    np.testing.assert_array_equal(net, 6.25)              # 12.5 GB/s NIC per 2 GPUs
    local, net = gpu_bandwidth(Topology("p", [[0, 1], [1, 0]]))
    assert list(local) == [1.0, 1.0] and list(net) == [0.0, 0.0]


def test_summary_fields():
    s = summary(load("dgx-h100", nodes=2))
    assert s["ranks"] == 16 and s["machines"] == 2 and s["gpus_per_machine"] == 8
    assert s["local_gbs_per_gpu"] == (450.0, 450.0)
    assert s["network_gbs_per_gpu"] == (50.0, 50.0)
    assert s["bisection_gbs"] == 400.0 and s["diameter"] == 1
    assert s["direct_links"] == 2 * 56 and s["nics"] == 16 and s["switches"] == 2


@pytest.mark.parametrize("name, nodes", [("dgx-h100", 4), ("ndv2", 3), ("dgx1", 5),
                                         ("nd-mi300x-v5", 2)])
def test_cluster_cuts_and_diameter_without_rank_pairs(name, nodes):
    # the per-class figure is the pairwise one, on sides that split machines unevenly
    from msccl_py.topologies.analysis import cluster_cut, diameter
    topo = load(name, nodes=nodes)
    rng = np.random.default_rng(7)
    for _ in range(5):
        side = rng.random(topo.num_nodes()) < 0.4
        assert cluster_cut(topo, side) == pytest.approx(
            cut_bandwidth(topo, np.nonzero(side)[0]))
    assert diameter(topo) == topo.diameter()
