"""Network kinds: the grammar that names them and the latency each gives a cluster."""

import pytest

from msccl_py.errors import TopologyError
from msccl_py.simulate.machine import machine_model
from msccl_py.topologies import load, loads, networks

PAIR = ("machine m { gpus 2 linktype l 25 GB/s link 0 <-> 1 l "
        "nic n0 100 Gb/s gpus 0-1 %s }")


def _latency(topo) -> float:
    return machine_model(topo).network_latency_us


@pytest.mark.parametrize("name, expected", [("p4de", 77.7), ("bm-gpu4", 2.7),
                                            ("bm-gpu-h100", 2.7), ("nd-h200-v5", 2.7),
                                            ("a3-mega", 46.7), ("dgx-h100", 2.7)])
def test_each_rented_machine_gets_its_kinds_latency(name, expected):
    topo = load(name, nodes=2)
    k = networks.kind(topo.network_kind)
    assert _latency(topo) == pytest.approx(expected)
    assert expected == pytest.approx(k.latency_us + k.plugin_latency_us + k.step_us)


def test_p5_states_the_step_aws_measured():
    """p5.topo: NCCL's 2.7 us plus the 20 us aws-ofi-nccl's tuner models a P5 network step
    with, below the kind's 2.7 + 75 (the latency the plugin reports to steer NCCL)."""
    topo = load("p5", nodes=2)
    assert topo.network_kind == "efa"
    assert _latency(topo) == pytest.approx(2.7 + 20.0)


def test_efa_plugin_reports_more_latency_than_ib_and_tcpxo_drops_ll():
    # aws-ofi-nccl reports 75 us per network step to NCCL; NCCL's IB transport 0
    assert networks.kind("efa").plugin_latency_us == 75.0
    assert networks.kind("ib").plugin_latency_us == networks.kind("roce").plugin_latency_us == 0
    assert networks.kind("tcpxo").protocols == ("LL128", "Simple")
    assert networks.kind("ib").protocols == ("LL", "LL128", "Simple")
    assert set(networks.KINDS) == {"ib", "roce", "efa", "tcpxo"}


def test_machine_kind_sets_the_cluster_kind():
    topo = loads(PAIR % "network kind efa", nodes=2)
    assert topo.network_kind == "efa" and _latency(topo) == pytest.approx(2.7 + 75)
    assert networks.of_topology(topo).plugin_latency_us == 75.0
    assert networks.of_topology(loads(PAIR % "network kind efa")) is None   # one node


def test_machine_latency_overrides_its_kind():
    topo = loads(PAIR % "network kind efa latency 7 us", nodes=2)
    assert _latency(topo) == 7.0


def test_cluster_kind_replaces_the_machines():
    topo = loads(PAIR % "network kind efa latency 7 us"
                 + " cluster c { machine m nodes 2 network 50 Gb/s kind roce }")
    assert topo.network_kind == "roce" and _latency(topo) == 2.7
    assert {topo.graph.nodes[n]["bw"] for n in topo.devices("nic")} == {6.25}


def test_cluster_kind_statement_and_explicit_latency():
    topo = loads(PAIR % "" + " cluster c { machine m nodes 2 network kind tcpxo latency 30 us }")
    assert topo.network_kind == "tcpxo" and _latency(topo) == 30.0
    bare = loads(PAIR % "", nodes=2)
    assert bare.network_kind is None and _latency(bare) == 2.7   # the model's default


def test_unknown_kind_is_an_error_at_its_position():
    with pytest.raises(TopologyError, match=r"x\.topo:1:\d+: unknown network kind 'ethernet'; "
                                            r"expected one of ib, roce, efa, tcpxo"):
        loads(PAIR % "network kind ethernet", file="x.topo")
    with pytest.raises(TopologyError, match="unknown network kind 'nvlink'"):
        networks.kind("nvlink")


def test_kind_without_a_name_is_a_syntax_error():
    with pytest.raises(TopologyError, match="expected a name"):
        loads(PAIR % "network kind", file="x.topo")
