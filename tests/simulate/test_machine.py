"""The machine model: paths, α and β, shared resources, limits and protocols from files."""

from __future__ import annotations

import numpy as np
import pytest

from msccl_py import library
from msccl_py.errors import SimulationError
from msccl_py.simulate import PROTOCOLS, machine_model, simulate
from msccl_py.topologies import Topology, load, loads

from sim_machines import RING8


def test_direct_link_path():
    m = machine_model(loads(RING8))
    p = m.path(3, 4)
    assert (p.alpha_us, p.bw_GBps, p.hops) == (0.5, 100.0, 1)
    assert [m.resources[k].name for k in p.resources] == ["link 3->4 (l)"]
    assert m.path(4, 3).resources != p.resources  # each direction is its own resource


def test_route_without_direct_link_uses_every_hop():
    m = machine_model(loads(RING8))
    p = m.path(0, 3)
    assert p.hops == 3 and p.alpha_us == pytest.approx(1.5)
    assert [m.resources[k].name for k in p.resources] == [
        "link 0->1 (l)", "link 1->2 (l)", "link 2->3 (l)"]


def test_switch_ports_and_nics():
    m = machine_model(load("dgx-h100", nodes=2))
    local = m.path(0, 5)
    assert [m.resources[k].name for k in local.resources] == [
        "switch nvswitch@0 port 0 out", "switch nvswitch@0 port 5 in"]
    assert local.bw_GBps == 450.0 and local.alpha_us == pytest.approx(0.6)
    remote = m.path(0, 8)
    assert [m.resources[k].name for k in remote.resources] == ["nic ib0@0 out", "nic ib0@1 in"]
    assert remote.bw_GBps == 50.0 and remote.alpha_us == pytest.approx(2.7)


def test_model_statements_in_topology_files():
    topo = loads(RING8.replace("}", "threadblock 20 GB/s memory 800 GB/s "
                                     "protocol Simple latency 1 us base 3 us }"))
    m = machine_model(topo)
    assert (m.threadblock_bw, m.memory_bw) == (20.0, 800.0)
    assert m.protocol("Simple").hop_latency_us == 1.0 and m.protocol("Simple").base_us == 3.0
    assert m.protocol("LL") == PROTOCOLS["LL"]
    # one threadblock per direction now moves 20 GB/s, not the link's 100
    alg = library.compile("allgather_ring", 8)
    r, = simulate(alg, m, "1GiB")
    assert r.busbw_GBps == pytest.approx(20.0, rel=0.05)
    assert r.bottleneck.startswith("threadblock rank ")


def test_old_topology_files_get_defaults():
    m = machine_model("dgx1")
    assert m.threadblock_bw is None
    assert m.protocols == PROTOCOLS


def test_unitless_topology_is_refused():
    with pytest.raises(SimulationError, match="counts links but gives them no speed"):
        machine_model(Topology("pair", [[0, 1], [1, 0]]))


@pytest.mark.parametrize("ranks,hint", [(16, r"simulate 2 nodes of the machine \(--nodes 2\)"),
                                        (4, r"simulate it on a machine of 4 GPUs")])
def test_rank_count_must_match_the_machine(ranks, hint):
    alg = library.compile("allgather_ring", ranks)
    with pytest.raises(SimulationError, match=f"{ranks} ranks but machine 'dgx-h100' has 8 "
                                              f"GPUs: {hint}, or build it for 8 ranks "
                                              r"\(library programs: --ranks 8\)$"):
        simulate(alg, "dgx-h100", "1MiB")


def test_unknown_protocol_statement_names_the_line():
    with pytest.raises(Exception, match=r"<text>:1:\d+: unknown protocol 'Fast'"):
        loads("machine m { gpus 2 protocol Fast latency 1 us }")


def test_cluster_network_latency_and_bandwidth():
    topo = loads("machine m { gpus 2 linktype l 25 GB/s link 0 <-> 1 l nic ib 100 Gb/s gpus 0-1 }"
                 " cluster c { machine m nodes 2 network 200 Gb/s latency 4 us }")
    m = machine_model(topo)
    assert m.network_latency_us == 4.0
    p = m.path(1, 2)
    assert (p.alpha_us, p.bw_GBps, p.hops) == (4.0, 25.0, 1)
    assert [m.resources[k].name for k in p.resources] == ["nic ib@0 out", "nic ib@1 in"]


def test_a_protocols_threadblock_limit_applies_on_top_of_the_machines():
    m = machine_model(loads(RING8.replace("}", "threadblock 40 GB/s threadblock LL 15 GB/s "
                                               "threadblock LL128 60 GB/s }")))
    assert m.threadblock_limit("Simple") == 40.0
    assert m.threadblock_limit("LL") == 15.0 and m.threadblock_limit("LL128") == 40.0
    alg = library.compile("allgather_ring", 8, protocol="LL")
    r, = simulate(alg, m, "1GiB")
    assert r.busbw_GBps == pytest.approx(15.0 * 0.5, rel=0.05)   # LL: 8 data bytes per 16
    assert m.with_bandwidth_scale(2).threadblock_limit("LL") == 30.0


def test_machine_model_reads_calibrated_launch_and_bandwidth_scale():
    """A calibrated file's ``launch`` and ``bandwidth scale`` reach every simulation of it
    (``simulate nccl --topology OUT.topo``), not only calibration's own round trip."""
    from msccl_py.topologies import loads
    from msccl_py.simulate import machine_model
    text = "machine m { gpus 2 linktype l 25 GB/s link 0 <-> 1 l %s }"
    plain = machine_model(loads(text % ""))
    fitted = machine_model(loads(text % "launch 5 us bandwidth scale 0.5"))
    assert fitted.launch_us == 5.0 and plain.launch_us != 5.0
    assert fitted.bw_scale == 0.5 and plain.bw_scale == 1.0
    assert fitted.launch_overhead_us(3) == 10.0


def test_simple_has_a_total_per_nvidia_gpu():
    """On NVIDIA GPUs all of a GPU's Simple threadblocks together move at most NCCL's NVLink
    budget (links x SM*_NVLINK_BW): an all-pairs allreduce with 4 instances (28 sending
    threadblocks, each under the per-threadblock limit) no longer fills the datasheet
    links. AMD GPUs keep Simple on their xGMI links (no total)."""
    from msccl_py.topologies.rings import NCCL_NVLINK_BW
    h100 = machine_model(load("dgx-h100"))
    budget = 18 * dict(NCCL_NVLINK_BW)[90]
    assert h100.gpu_limit("Simple") == pytest.approx(budget)
    alg = library.compile("allreduce_allpairs", 8, instances=4, protocol="Simple")
    r, = simulate(alg, h100, "1GiB")
    # busbw is what each GPU puts on the wire per second
    assert budget * 0.9 <= r.busbw_GBps <= budget * (1 + 1e-9)
    # without the total the same program fills more than the budget (427 GB/s busbw)
    from dataclasses import replace
    links_only = replace(h100, gpu_protocol_bw={k: v for k, v in h100.gpu_protocol_bw.items()
                                                if k != "Simple"})
    assert simulate(alg, links_only, "1GiB")[0].busbw_GBps > budget * 1.1
    assert machine_model(load("mi300x")).gpu_limit("Simple") is None
    # the total scales with a calibrated bandwidth scale, as every resource does
    assert h100.with_bandwidth_scale(0.5).gpu_limit("Simple") == pytest.approx(budget / 2)


def test_simple_total_counts_only_sends_inside_the_machine(monkeypatch):
    """NCCL's Simple budget is an NVLink figure: what a GPU sends through its NIC to
    another machine is not in it, so a GPU can fill its NVLink budget and its NIC at
    once. LL's total (llMaxBws) counts every send."""
    from msccl_py.simulate.machine import Machine
    two = machine_model(load("dgx-h100", nodes=2))
    assert list(two.same_machine(np.array([0, 0, 7]), np.array([7, 8, 15]))) == \
        [True, False, False]
    alg = library.compile("allreduce_hierarchical", 16, protocol="Simple", gpus_per_node=8)
    from msccl_py.plan.tables import plan_for
    from msccl_py.simulate.engine import wiring
    plan = plan_for(alg)
    apart = wiring(plan, two, "Simple").rate
    # counting the NIC sends in the NVLink budget too cuts the whole-call shares of the
    # connections inside the machine (the engine then shares it among those busy at once)
    monkeypatch.setattr(Machine, "same_machine",
                        lambda self, src, dst: np.ones(len(src), dtype=bool))
    counted = wiring(plan, machine_model(load("dgx-h100", nodes=2)), "Simple").rate
    assert (counted <= apart * (1 + 1e-12)).all() and (counted < apart * 0.9).any()


def test_ampere_nvlink_generation_latency_is_the_measured_line_beyond_nccls():
    """On A100s joined by NVLink every program pays what NCCL's kernels measure beyond
    NCCL's constants (NVIDIA/nccl-tests issue #123's DGX-A100 line less 6.6 + 0.6/step LL,
    8.4 + 3.4/step Simple): LL 10.6 - 6.6 = 4.0 us fixed and 0.73 - 0.6 = 0.13 per NVLink
    hop; Simple 14.8 - 8.4 = 6.4 and 4.8 - 3.4 = 1.4; LL128 nothing (its measured line lies
    below NCCL's). Hopper, Volta and AMD machines pay only the protocol's figures."""
    from msccl_py.simulate.machine import AMPERE_NVLINK_LATENCY
    assert AMPERE_NVLINK_LATENCY["LL"] == (10.6, 0.73)
    for name in ("dgx-a100", "ndv4", "p4de", "bm-gpu4"):
        gen = machine_model(load(name)).generation_latency
        assert set(gen) == {"LL", "Simple"}
        assert gen["LL"] == pytest.approx((4.0, 0.13))
        assert gen["Simple"] == pytest.approx((6.4, 1.4))
    a100 = machine_model(load("dgx-a100"))
    assert a100.fixed_us("LL") == pytest.approx(10.6) and a100.fixed_us("LL128") == 14.0
    p = a100.path(0, 1)
    assert p.nvlink_hops == 1
    assert a100.hop_alpha_us(p, "LL") == pytest.approx(0.73)
    assert a100.hop_alpha_us(p, "Simple") == pytest.approx(4.8)
    assert machine_model(load("dgx-a100", nodes=2)).path(0, 8).nvlink_hops == 0
    for name in ("dgx-h100", "dgx1", "mi300x"):
        assert machine_model(load(name)).generation_latency == {}
    # an A100 without NVLink (PCIe only) is not what the line measured
    pcie = loads("machine m { gpus 2 model \"A100-PCIE-40GB\" linktype pcie 24 GB/s "
                 "link 0 <-> 1 pcie }")
    assert machine_model(pcie).generation_latency == {}


def test_custom_program_on_ampere_pays_the_generations_latency(shared_dir):
    """Worked by hand: MSCCL's all-pairs LL allreduce (ap4ll) at 1 KiB on dgx-a100 is a
    chain of two NVLink hops (each rank sends its peers their shares, then their sums), so
    Ampere adds 4.0 us fixed and 2 x 0.13 us of hops: 4.26 us over the same machine
    without the generation's latency, as NCCL's own ring pays 4.0 + 14 x 0.13 on it."""
    from dataclasses import replace
    from msccl_py.targets.msccl.read import read_xml
    alg = read_xml(shared_dir / "corpus" / "xml" / "msccl-scheduler__ndv4__ap4ll.xml")
    a100 = machine_model(load("dgx-a100"))
    plain = replace(a100, generation_latency={}, _paths={})
    paid, = simulate(alg, a100, [1024])
    hopper_like, = simulate(alg, plain, [1024])
    assert paid.time_us - hopper_like.time_us == pytest.approx(4.0 + 2 * 0.13, abs=1e-6)
    # the engine's nccl_ring pays the same as simulate nccl's Ring/LL at 8 B: 10.6 + 14 x 0.73
    ring = library.compile("nccl_ring", 8, protocol="LL")
    gap = simulate(ring, a100, [8])[0].time_us - simulate(ring, plain, [8])[0].time_us
    assert gap == pytest.approx(4.0 + 14 * 0.13, abs=1e-6)
