"""MSCCLang-compatible builders and transformations."""

import pytest

from msccl_py.errors import TopologyError
from msccl_py.topologies import (binarize_topology, fully_connected, hub_and_spoke, line,
                                 reverse_topology, ring, star)
from msccl_py.topologies.distributed import distributed_fully_connected, distributed_hub_and_spoke


def test_star_import_gives_msccl_names():
    scope: dict = {}
    exec("from msccl_py.topologies import *", scope)
    for name in ("Topology", "fully_connected", "ring", "line", "star", "hub_and_spoke", "dgx1",
                 "dgx_a100", "nvlink_only", "reverse_topology", "binarize_topology", "amd4",
                 "amd8", "load", "resolve"):
        assert name in scope


def test_generic_matrices():
    assert fully_connected(3).links == [[0, 1, 1], [1, 0, 1], [1, 1, 0]]
    assert ring(4).links == [[0, 1, 0, 1], [1, 0, 1, 0], [0, 1, 0, 1], [1, 0, 1, 0]]
    assert ring(2).links == [[0, 1], [1, 0]]
    assert line(3).links == [[0, 1, 0], [1, 0, 1], [0, 1, 0]]
    assert star(3).links == [[0, 1, 1], [1, 0, 0], [1, 0, 0]]
    assert fully_connected(4).name == "FullyConnected(n=4)"
    assert ring(1).links == [[0]]


def test_star_blocking_and_hub_and_spoke_switches():
    assert star(4).switches == []
    assert star(4, non_blocking=False).switches == [([0], [1, 2, 3], 1, "to_points"),
                                                   ([1, 2, 3], [0], 1, "from_points")]
    sw = hub_and_spoke(3).switches
    assert sw[0] == ([0], [1, 2], 1, "node_0_out") and sw[1] == ([1, 2], [0], 1, "node_0_in")
    assert len(sw) == 6


@pytest.mark.parametrize("builder", [fully_connected, ring, line, star, hub_and_spoke])
@pytest.mark.parametrize("bad", [0, -1, 2.5, "4"])
def test_bad_gpu_counts(builder, bad):
    with pytest.raises(TopologyError, match="needs an integer number of GPUs"):
        builder(bad)


def test_reverse_transposes_links_and_switches():
    t = star(3, non_blocking=False)
    r = reverse_topology(t)
    assert r.name == "Reverse" + t.name
    assert r.links == [list(col) for col in zip(*t.links)]
    assert r.switches[0] == ([1, 2], [0], 1, "to_points_reversed")


def test_binarize_keeps_connectivity_only():
    from msccl_py.topologies import dgx1
    b = binarize_topology(dgx1())
    assert b.switches == []
    assert b.links[0] == [0, 1, 1, 1, 1, 0, 0, 0]


def test_distributed_fully_connected():
    t = distributed_fully_connected(ring(3), 2, 4)
    assert t.num_nodes() == 6
    assert t.links[1][0] == 1 and t.links[0][1] == 1   # local ring links
    assert t.link(0, 4) == 4 and t.link(5, 2) == 4     # remote links
    assert t.switches == []


def test_distributed_hub_and_spoke_switches():
    t = distributed_hub_and_spoke(fully_connected(2), 3, 1)
    names = [name for *_, name in t.switches]
    assert names == ["copy_0_out_remote", "copy_0_in_remote", "copy_1_out_remote",
                     "copy_1_in_remote", "copy_2_out_remote", "copy_2_in_remote"]
    assert t.switches[2] == ([2, 3], [0, 1, 4, 5], 1, "copy_1_out_remote")


def test_distributed_copies_local_switches():
    t = distributed_fully_connected(star(3, non_blocking=False), 2, 1)
    assert ([3], [4, 5], 1, "copy_1_to_points_local") in t.switches


@pytest.mark.parametrize("copies, bw, message", [(0, 1, "num_copies"), (2, 0, "remote_bw")])
def test_distributed_bad_arguments(copies, bw, message):
    with pytest.raises(TopologyError, match=message):
        distributed_fully_connected(ring(2), copies, bw)
