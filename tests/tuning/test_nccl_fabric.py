"""The fabric term of ``simulate nccl``: NCCL's ring and tree edges on a leaf/spine fabric."""

from __future__ import annotations

import pytest

from msccl_py.topologies import load
from msccl_py.topologies.fabric import of
from msccl_py.tuning import nccl_model as nm
from msccl_py.tuning.nccl_fabric import fabric_share, pattern, tree_parents
from msccl_py.tuning.nccl_sim import simulate_nccl


def cluster(tmp_path, *, nodes=8, group=2, os=4, placement="packed"):
    path = tmp_path / f"c-{placement}-{os}.topo"
    path.write_text(f"cluster c {{ machine dgx-h100 nodes {nodes}\n"
                    f"  fabric rail group {group} spines 2 oversubscription {os} "
                    f"placement {placement} }}\n")
    return load(str(path))


def test_trees_are_ncclgetdtree_s():
    # the two trees drawn in NCCL's src/graph/trees.cc: mirrored for 14 ranks ...
    first, second = tree_parents(14)
    assert first == [-1, 2, 4, 2, 8, 6, 4, 6, 0, 10, 12, 10, 8, 12]
    assert second == [13 - p if p >= 0 else -1 for p in reversed(first)]
    # ... shifted by one for 13: root 1, 9 under it, 5 and 0 under 9, 11 under 0
    _, shifted = tree_parents(13)
    assert shifted[1] == -1 and shifted[9] == 1 and shifted[5] == 9 and shifted[0] == 9
    assert shifted[11] == 0 and shifted[10] == 11 and shifted[12] == 11
    # every node but the roots sends its half up and gets its half down: 2 per inner node
    out = [0.0] * 14
    for a, _, w in pattern("Tree", 14):
        out[a] += w
    assert max(out) == 2.0


def test_round_robin_ring_runs_at_the_uplinks_share(tmp_path):
    # 8 machines in 4 groups of 2, round-robin: every ring edge leaves its group, so a group
    # sends 2 NICs' worth through uplinks of 2 / 4: a quarter of the NICs' pace
    topo = cluster(tmp_path, placement="round-robin")
    assert [of(topo).group_of(m) for m in range(8)] == [0, 1, 2, 3, 0, 1, 2, 3]
    share, leaf = fabric_share(topo, "Ring")
    assert share == pytest.approx(0.25) and leaf.startswith("leaf g")
    ring = nm.ring_graph(topo)
    nics, nic = nm._nic_bw(topo)
    free = nm.nccl_tune(topo, "allreduce")["Ring", "Simple"]
    held = nm.nccl_tune(topo, "allreduce", fabric=True)["Ring", "Simple"]
    assert free.busbw == pytest.approx(ring.channels * ring.bw_inter)
    assert held.busbw == pytest.approx(min(free.busbw, 0.25 * nics * nic))


def test_packed_ring_crosses_each_group_once(tmp_path):
    # packed, one edge leaves each group of 2: load 1 on uplinks of 2 / 4
    topo = cluster(tmp_path, placement="packed")
    assert fabric_share(topo, "Ring")[0] == pytest.approx(0.5)
    # groups of 4 at 2:1: one edge on uplinks of 2 machines' worth does not bind
    assert fabric_share(cluster(tmp_path, group=4, os=2), "Ring") == (1.0, "")


@pytest.mark.parametrize("placement", ["packed", "round-robin", "scattered"])
def test_full_bisection_never_slows_nccl(tmp_path, placement):
    topo = cluster(tmp_path, nodes=12, group=3, os=1, placement=placement)
    assert fabric_share(topo, "Ring") == (1.0, "") and fabric_share(topo, "Tree") == (1.0, "")


def test_nccls_choice_does_not_see_the_fabric(tmp_path):
    slow = cluster(tmp_path, placement="round-robin")
    fast = cluster(tmp_path, os=1, placement="round-robin")
    for size in (1 << 20, 1 << 30):
        assert nm.choose(slow, "allreduce", size) == nm.choose(fast, "allreduce", size)
        a, b = (simulate_nccl(t, sizes=[size])[0] for t in (slow, fast))
        assert a.algorithm == b.algorithm and a.time_us > b.time_us


def test_the_named_two_to_one_cluster_is_at_the_nics_pace_when_packed(tmp_path):
    # 32 machines a group, 4 groups: packed, NCCL's ring and trees cross a group's uplinks a
    # few times, far below 2:1's 16 NICs' worth; scattered, about 3/4 of the edges cross
    os2, full = load("rail-h100-128-os2"), load("rail-h100-128")
    assert fabric_share(os2, "Ring") == (1.0, "") and fabric_share(os2, "Tree") == (1.0, "")
    packed = [r.time_us for t in (os2, full) for r in simulate_nccl(t, sizes=[1 << 30])]
    assert packed[0] == pytest.approx(packed[1])
    text = (tmp_path / "s.topo")
    text.write_text("cluster s { machine dgx-h100 nodes 128 fabric rail group 32 spines 16 "
                    "oversubscription 2 rail 400 Gb/s placement scattered }")
    scattered = load(str(text))
    # a group's tree edges: 2 NICs' worth each of 32 machines, 96 / 127 of them across,
    # on uplinks of 16: at most 1 / 1.51 of the NICs' pace (the busiest group, less)
    share, _ = fabric_share(scattered, "Tree")
    assert 0.5 < share < 1 / (2 * 96 / 127)
    slow = simulate_nccl(scattered, sizes=[1 << 30])[0]
    assert slow.algorithm == "NVLSTree" and slow.time_us > 1.05 * packed[1]


def test_alltoall_pays_two_to_one_in_any_placement(tmp_path):
    # every machine sends each other an equal share: a group of 2 of 8 sends 6/7 of its
    # NICs' traffic up, over uplinks of 2 / 4 machines' worth
    for placement in ("packed", "round-robin"):
        share, _ = fabric_share(cluster(tmp_path, placement=placement), "P2P")
        assert share == pytest.approx(1 / (4 * 6 / 7))
    # the named 2:1 cluster: 96 of 127 peers sit in other groups, 1.51 uplinks' worth
    os2, full = load("rail-h100-128-os2"), load("rail-h100-128")
    assert fabric_share(os2, "P2P")[0] == pytest.approx(127 / 192)
    slow, fast = (simulate_nccl(t, "alltoall", sizes=[1 << 30])[0] for t in (os2, full))
    assert slow.time_us / fast.time_us == pytest.approx(192 / 127, rel=0.01)
