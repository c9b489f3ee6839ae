"""Fabrics in cluster files: parsing, routes, capacities, and what `topology show` says."""

import pytest

from msccl_py.cli import main
from msccl_py.errors import TopologyError
from msccl_py.topologies import load, loads
from msccl_py.topologies.fabric import Fabric, FabricSpec, of, representative_machines

MACHINE = """
machine box { gpus 2 linktype l 100 GB/s link 0 <-> 1 l
              nic a 100 Gb/s gpus 0  nic b 100 Gb/s gpus 1 }
"""


def cluster(fabric: str, nodes: int = 6) -> str:
    return MACHINE + f"cluster c {{ machine box nodes {nodes} {fabric} }}"


def test_rail_statement_sets_every_figure():
    topo = loads(cluster("fabric rail group 4 spines 2 oversubscription 2 hop 130 ns "
                         "rail 400 Gb/s rail 1 200 Gb/s"))
    fab = of(topo)
    assert fab.spec.kind == "rail" and fab.spec.group == 4 and fab.spec.spines == 2
    assert fab.spec.hop_us == pytest.approx(0.13)
    # rail speeds replace the machine's NIC speeds: rail 0 everywhere, rail 1 its own
    assert [topo.graph.nodes[n]["bw"] for n in ("a@0", "b@0")] == [50.0, 25.0]
    assert fab.groups == 2 and fab.members(1) == 2
    assert fab.leaf_up(0, 0) == 4 * 50 / 2 and fab.leaf_up(1, 1) == 2 * 25 / 2


def test_without_a_statement_the_cluster_keeps_one_switch():
    topo = loads(cluster(""))
    assert of(topo) is None
    assert topo.graph.nodes["network"]["wiring"] == "flat"


@pytest.mark.parametrize("text, message", [
    ("fabric ring group 2 spines 2", "unknown fabric 'ring'"),
    ("fabric rail group 2", "needs spines"),
    ("fabric three-tier group 2 spines 2 pod 2", "needs cores"),
    ("fabric rail group 2 spines 2 oversubscription 0.5", "at least 1"),
    ("fabric rail group 2.5 spines 2", "positive integer"),
    ("fabric rail group 2 spines 2 placement random", "unknown placement 'random'"),
    ("fabric rail group 2 spines 2 placement packed 3", "only a scattered placement"),
])
def test_bad_fabrics_name_the_line(text, message):
    with pytest.raises(TopologyError, match=message) as info:
        loads(cluster(text), file="c.topo")
    assert "c.topo:4" in str(info.value)


def test_a_rail_the_machine_lacks_is_refused():
    with pytest.raises(TopologyError, match="fabric sets rail 2, but machine 'box' has 2 NICs"):
        loads(cluster("fabric rail group 2 spines 2 rail 2 100 Gb/s"))


def test_rail_routes_cross_spines_only_between_groups_or_rails():
    fab = Fabric(FabricSpec("rail", group=2, spines=4, hop_us=0.1), 4, [50.0, 50.0])
    assert fab.route(0, 0, 1, 0) == [] and fab.switch_hops(0, 0, 1, 0) == 1
    across_rails = [h.name for h in fab.route(0, 0, 1, 1)]
    assert across_rails[0] == "leaf g0/r0 up" and across_rails[-1] == "leaf g0/r1 down"
    assert across_rails[1].startswith("spine ")
    assert fab.latency_us(0, 0, 3, 0) == pytest.approx(0.3)
    # each spine carries its share of every leaf's uplinks: 4 leaves x 100 GB/s / 4 spines
    assert fab.spine_bw() == pytest.approx(100.0)


def test_three_tier_crosses_a_core_between_pods():
    spec = FabricSpec("three-tier", group=2, spines=2, pod=2, cores=4, hop_us=0.1)
    fab = Fabric(spec, 8, [50.0])
    assert fab.pods == 2 and fab.spine_count() == 4
    same_pod = [h.name for h in fab.route(0, 0, 2, 0)]
    assert len(same_pod) == 3 and same_pod[1].startswith("spine p0/")
    other_pod = [h.name for h in fab.route(0, 0, 4, 0)]
    assert [n.split()[0] for n in other_pod] == ["leaf", "spine", "core", "spine", "leaf"]
    assert fab.switch_hops(0, 0, 4, 0) == 5
    # non-blocking above the spine: the cores carry what the spines do
    assert fab.core_bw() * 4 == pytest.approx(fab.spine_bw(0) * 2 + fab.spine_bw(1) * 2)


def test_bisection_halves_with_two_to_one_above_the_leaf():
    full = Fabric(FabricSpec("rail", group=2, spines=2), 4, [50.0])
    half = Fabric(FabricSpec("rail", group=2, spines=2, oversubscription=2), 4, [50.0])
    assert full.bisection_GBps() == 100.0 and half.bisection_GBps() == 50.0


def test_representative_machines_stand_for_each_kind():
    topo = loads(cluster("fabric rail group 4 spines 2", nodes=10))
    # machine 0, a machine of its group, one of another full group, one of the short group
    assert representative_machines(topo) == [0, 1, 4, 8]
    assert representative_machines(loads(cluster(""))) == [0, 1]


def test_named_clusters_are_listed_and_shown(capsys):
    assert main(["topology", "list", "--names"]) == 0
    names = capsys.readouterr().out.split()
    assert {"rail-h100-128", "rail-h100-128-os2", "rail-h100-1024"} <= set(names)
    assert main(["topology", "show", "rail-h100-128-os2"]) == 0
    out = capsys.readouterr().out
    assert "rail-optimized two-tier: 4 leaf groups of 32 machines, 32 leaves, 16 spines" in out
    assert "2:1 above the leaf" in out and "130 ns" in out
    assert "bisection bandwidth           12800 GB/s" in out


def test_the_thousand_node_file_is_three_tier():
    topo = load("rail-h100-1024")
    fab = of(topo)
    assert topo.num_nodes() == 8192 and fab.spec.kind == "three-tier"
    # the SuperPOD counts its sources give: 256 leaves, 256 spines, 128 cores
    assert (fab.leaves(), fab.spine_count(), fab.spec.cores) == (256, 256, 128)


def test_the_drawing_labels_the_network_with_its_wiring():
    from msccl_py.topologies.draw import _fabric_label
    label = _fabric_label(loads(cluster("fabric rail group 4 spines 2 oversubscription 2")))
    assert label.startswith("rail-optimized two-tier") and "2:1 above the leaf" in label
    assert _fabric_label(loads(cluster(""))) == "inter-node network"


def test_placements_put_machines_in_groups():
    spec = dict(kind="rail", group=4, spines=2)
    packed = Fabric(FabricSpec(**spec), 10, [50.0])
    assert [packed.group_of(m) for m in range(10)] == [0] * 4 + [1] * 4 + [2] * 2
    # round-robin deals machines to groups in turn, skipping the short group once it is full
    robin = Fabric(FabricSpec(**spec, placement="round-robin"), 10, [50.0])
    assert [robin.group_of(m) for m in range(10)] == [0, 1, 2, 0, 1, 2, 0, 1, 0, 1]
    # scattered: a fixed permutation per seed, every group as full as when packed
    a, b, c = (Fabric(FabricSpec(**spec, placement="scattered", seed=s), 10, [50.0])
               for s in (0, 0, 1))
    groups = [a.group_of(m) for m in range(10)]
    assert sorted(groups) == sorted(packed.group_of(m) for m in range(10))
    assert groups == [b.group_of(m) for m in range(10)]
    assert groups != [c.group_of(m) for m in range(10)]
    rows = dict(loads(cluster("fabric rail group 2 spines 2 placement scattered 7")).graph
                .graph["fabric"].describe())
    assert rows["placement"] == "scattered (pseudo-random, seed 7)"


def test_a_scattered_cluster_keeps_its_bound_and_representatives():
    from msccl_py.synthesis import bound
    packed = loads(CLUSTER_6.format(os=16, placement="packed"))
    scattered = loads(CLUSTER_6.format(os=16, placement="scattered"))
    assert of(scattered).group_of(0) != 0     # machine 0 is not in the first group
    reps = representative_machines(scattered)
    assert len(reps) == len(representative_machines(packed))
    # a bound is over every schedule: the ranks' order cannot change it
    a, b = (bound(t, "allgather") for t in (packed, scattered))
    assert a.algbw_GBps == pytest.approx(b.algbw_GBps)


#: 6 DGX H100: a group of 4 and a group of 2
CLUSTER_6 = "cluster c {{ machine dgx-h100 nodes 6 fabric rail group 4 spines 2 " \
            "oversubscription {os} placement {placement} }}"


def test_the_uplinks_enter_the_cut_above_the_printed_ratio():
    from msccl_py.synthesis import bound
    topo = loads(CLUSTER_6.format(os=1, placement="packed"))
    ratio = of(topo).binding_oversubscription()
    assert ratio == pytest.approx(2 * 5 / 4)      # the group of 2 of 6 machines
    assert f"above {ratio:.3g}:1" in dict(of(topo).describe())["oversubscription"]
    below, above = (bound(loads(CLUSTER_6.format(os=ratio * f, placement="packed")),
                          "allgather") for f in (0.96, 1.04))
    assert below.cuts[0].switches == ()
    assert any(s.startswith("spine") for s in above.cuts[0].switches)
