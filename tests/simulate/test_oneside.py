"""MSCCL++ plans on the machine's links: the emitted plans time as their source XML does,
real MSCCL++ plans run, NVLS and plans that cannot finish are refused."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from msccl_py import library
from msccl_py.cli import main
from msccl_py.errors import SimulationError
from msccl_py.targets.mscclpp.emit import lower
from msccl_py.targets.mscclpp.read import read_plan
from msccl_py.simulate import machine_model, simulate
from msccl_py.simulate.oneside import simulate_plan
from msccl_py.topologies import load, loads

from sim_machines import RING8

PLANS = Path(__file__).resolve().parents[1] / "data" / "mscclpp"


@pytest.mark.parametrize("name,protocol", [("allreduce_ring", "Simple"),
                                           ("allgather_ring", "Simple"),
                                           ("allreduce_ring", "LL")])
def test_emitted_plan_times_like_its_xml_at_1GiB(name, protocol):
    alg = library.compile(name, 8, protocol=protocol)
    m = machine_model("dgx-h100")
    xml, = simulate(alg, m, "1GiB")
    plan, = simulate_plan(lower(alg), m, "1GiB")
    assert plan.time_us == pytest.approx(xml.time_us, rel=0.2)


def test_cli_takes_the_plan_file_next_to_the_xml(tmp_path, capsys):
    plan, xml = tmp_path / "p.json", tmp_path / "p.xml"
    assert main(["compile", "allreduce_ring", "--ranks", "8", "--target", "mscclpp",
                 "-o", str(plan)]) == 0
    assert main(["compile", "allreduce_ring", "--ranks", "8", "-o", str(xml)]) == 0
    capsys.readouterr()
    assert main(["simulate", str(plan), "--topology", "dgx-h100", "--sizes", "1GiB",
                 "--compare", str(xml), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    t_plan, t_xml = (d["results"][0]["time_us"] for d in doc)
    assert t_plan == pytest.approx(t_xml, rel=0.2)


@pytest.mark.parametrize("name,protocol", [("allreduce_ring", "Simple"),
                                           ("allreduce_ring", "LL"),
                                           ("allgather_ring", "Simple")])
def test_port_channels_cross_the_network(name, protocol):
    # 2 x dgx-h100: the ring crosses the NICs through port channels; the threadblocks are
    # cut into segments chained by semaphores, which run one after another
    alg = library.compile(name, 16, protocol=protocol)
    two = machine_model(load("dgx-h100", nodes=2))
    plan = lower(alg, gpus_per_node=8)
    assert any(g.port_channels for g in plan.gpus)
    got, = simulate_plan(plan, two, "1GiB")
    xml, = simulate(alg, two, "1GiB")
    assert got.time_us == pytest.approx(xml.time_us, rel=0.2)
    assert "segment" in got.bottleneck


#: two boxes of two GPUs, each GPU with its own 50 GB/s NIC, no threadblock limit
BOXES = ("machine box { gpus 2 linktype l 100 GB/s latency 0.5 us link 0 <-> 1 l "
         "nic n0 50 GB/s gpus 0 nic n1 50 GB/s gpus 1 }")


@pytest.mark.parametrize("name,params", [("allgather_ring", {}),
                                         ("allreduce_ring", {"channels": 2})])
def test_proxy_transfers_share_a_nic_only_while_they_overlap(name, params):
    # with two channels the ring's transfers reach the NIC one after another: each has it
    # to itself while alone, so the NIC stays busy (a static split would halve each one)
    alg = library.compile(name, 4, **params)
    m = machine_model(loads(BOXES, nodes=2))
    got, = simulate_plan(lower(alg, gpus_per_node=2), m, "1GiB")
    xml, = simulate(alg, m, "1GiB")
    assert got.time_us == pytest.approx(xml.time_us, rel=0.1)
    assert got.bottleneck.startswith("nic ") and got.utilization > 0.9


def test_segments_of_one_threadblock_do_not_share_a_link():
    # no threadblock limit: a cut threadblock's segments each get the whole link in turn
    alg = library.compile("allreduce_ring", 8)
    plan = lower(alg)
    m = machine_model(loads(RING8))
    got, = simulate_plan(plan, m, "1GiB")
    xml, = simulate(alg, m, "1GiB")
    assert got.time_us == pytest.approx(xml.time_us, rel=0.05)


def test_mscclpp_plans_stay_within_the_links():
    # MSCCL++'s own all-pairs allreduce: eight threadblocks per rank fill the switch port
    plan = read_plan(PLANS / "single_node" / "allreduce_8.json")
    r, = simulate_plan(plan, "dgx-h100", "1GiB")
    assert r.bottleneck.startswith("switch nvswitch port") and r.utilization <= 1.0 + 1e-9
    assert r.busbw_GBps <= 450.0 * (1 + 1e-9)


def test_nvls_plans_are_timed_where_the_switch_reduces(capsys):
    """MSCCL++'s NVLS allreduce on Hopper: each port carries the data about once per
    direction (the switch reduces and multicasts), so it beats any ring's 2(n-1)/n and stays
    under the in-switch bound; a machine without NVLink SHARP refuses it in one line."""
    from msccl_py.synthesis.bound import bound
    plan = read_plan(PLANS / "single_node" / "allreduce_nvls_zero_copy_8.json")
    r, = simulate_plan(plan, "dgx-h100", "1GiB")
    assert r.bottleneck.startswith("switch nvswitch port") and r.utilization <= 1.0 + 1e-9
    assert 450.0 < r.busbw_GBps <= bound("dgx-h100", "allreduce").busbw_GBps
    path = PLANS / "single_node" / "allreduce_nvls_zero_copy_8.json"
    assert main(["simulate", str(path), "--topology", "dgx-a100"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "uses NVLink SHARP (glres at gpus[0]" in err


def test_a_plan_that_never_finishes_is_an_error():
    plan = lower(library.compile("allgather_ring", 8))
    broken = copy.deepcopy(plan)
    for tb in broken.gpus[0].threadblocks:       # rank 0 never signals its neighbour
        tb.ops = [op for op in tb.ops if op.name != "signal"]
    with pytest.raises(SimulationError, match=r"never finishes: rank \d threadblock \d+ op \d+ "
                                              r"\(wait\) waits forever"):
        simulate_plan(broken, "dgx-h100", "1MiB")


def test_plan_rank_count_must_match_the_machine():
    plan = read_plan(PLANS / "single_node" / "allgather.json")
    with pytest.raises(SimulationError, match="has 2 ranks but machine 'dgx-h100' has 8 GPUs"):
        simulate_plan(plan, "dgx-h100", "1MiB")


def test_a_transfer_of_nothing_is_not_a_division_by_zero():
    # MSCCL++'s unit-test plan reads packets its test harness writes: the model says so
    # (it used to divide by the zero bytes its empty connection carries)
    plan = read_plan(PLANS / "unit_tests" / "read_put_packet_test.json")
    m = machine_model(loads(BOXES))
    with pytest.raises(SimulationError, match=r"rank 0 threadblock 0 op 0 \(rppkt\) waits forever"):
        simulate_plan(plan, m, "1MiB")
