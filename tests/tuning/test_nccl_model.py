"""NCCL's cost model, checked against tuning.cc's arithmetic worked by hand (NCCL 2.30).

Each expected figure is written out from the constants of ``src/graph/tuning.cc``
(baseLatencies, hwLatencies, llMaxBws, perChMax*Bws, nvlsEfficiency) and the
graphs NCCL's search finds (``src/graph/search.cc``), so a wrong constant or a
wrong formula in the model shows up as a number, not as a ranking.
"""

from __future__ import annotations

import pytest

from msccl_py.errors import MscclError
from msccl_py.topologies import load
from msccl_py.tuning.nccl_model import (channels_for, choose, comm_channels, nccl_tune,
                                        nvls_graph, ring_graph)


def test_dgx_h100_table_is_tuning_cc():
    t = nccl_tune(load("dgx-h100"), "allreduce")
    # NVLS: 8 channels at 40 GB/s (9 shares of 18 x 20.6 fit 40, sm90SpeedArrayIntra),
    # x 0.85 (nvlsEfficiency Hopper) x 7/8 x 2 (allreduce) = 476 bus; latency hwLat 25
    assert t["NVLS", "Simple"].busbw == pytest.approx(8 * 40 * 0.85 * 7 / 8 * 2)
    assert t["NVLS", "Simple"].latency == pytest.approx(25.0)
    assert t["NVLS", "Simple"].bandwidth == pytest.approx(476 * 8 / 14)
    # ring LL: 12 x 30 x 0.5 = 180, capped at llMaxBws Hopper 141; 6.6 + 14 x 0.6
    assert t["Ring", "LL"].busbw == pytest.approx(141.0)
    assert t["Ring", "LL"].latency == pytest.approx(6.6 + 14 * 0.6)
    # ring LL128: min(0.92 x 360, 12 x 36.7); 14 + 14 x 1.9
    assert t["Ring", "LL128"].busbw == pytest.approx(0.92 * 360)
    assert t["Ring", "LL128"].latency == pytest.approx(14 + 14 * 1.9)
    # tree on one node: min(0.92 x 360, 12 x 38.7) x 0.5 algbw, LL / 3.8; 6.8 + 2 x 7 x 0.6
    assert t["Tree", "Simple"].bandwidth == pytest.approx(0.92 * 360 * 0.5)
    assert t["Tree", "LL"].latency == pytest.approx(6.8 + 2 * 7 * 0.6)
    assert ("NVLSTree", "Simple") not in t             # off on a single node


def test_dgx_h100_choice_ll_then_nvls():
    topo = load("dgx-h100")
    # LL: 15 + S / 80.57 GB/s; NVLS: 25 + S / 272 GB/s -> they cross at 1.14 MB
    assert choose(topo, "allreduce", 1 << 20)[:2] == ("Ring", "LL")
    assert choose(topo, "allreduce", 2 << 20)[:2] == ("NVLS", "Simple")
    assert choose(topo, "allreduce", 1 << 30).channels == 16       # NVLS_NCHANNELS_SM90
    # allgather: ring, or NVLS at 40 x 0.85 x 7/8 x 7/8 per channel (not doubled)
    ag = nccl_tune(topo, "allgather")
    assert ag["NVLS", "Simple"].busbw == pytest.approx(8 * 40 * 0.85 * 7 / 8 * 7 / 8)


def test_dgx_a100_protocol_crossovers():
    topo = load("dgx-a100")
    # LL 15.0 + S/50.1; LL128 40.6 + S/126.2; Simple 56 + S/137.1 (GB/s algbw):
    # LL to 2.13 MB, LL128 to 24.3 MB, then Simple; no NVLS on Ampere
    picks = {s: choose(topo, "allreduce", s)[:2] for s in (2 << 20, 4 << 20, 16 << 20,
                                                            32 << 20)}
    assert picks == {2 << 20: ("Ring", "LL"), 4 << 20: ("Ring", "LL128"),
                     16 << 20: ("Ring", "LL128"), 32 << 20: ("Ring", "Simple")}
    assert nvls_graph(topo) is None
    assert nccl_tune(topo, "allreduce")["Ring", "LL"].busbw == pytest.approx(87.7)


def test_dgx1_volta_figures():
    topo = load("dgx1")
    t = nccl_tune(topo, "allreduce")
    # 6 rings at 20 GB/s; LL: min(39 (llMaxBws Volta), 60); LL128 per channel 20
    assert ring_graph(topo).channels == 6
    assert t["Ring", "LL"].busbw == pytest.approx(39.0)
    assert t["Ring", "LL128"].busbw == pytest.approx(min(0.92 * 120, 6 * 20.0))


def test_two_hopper_nodes_nvlstree_and_tree():
    topo = load("dgx-h100", nodes=2)
    t = nccl_tune(topo, "allreduce")
    # NVLSTree, 2 nodes: min(40 x 0.85 x 7/8 x 2, 2 x 40, perChMaxNVLSTreeBws 57.7) x 8
    assert t["NVLSTree", "Simple"].busbw == pytest.approx(8 * 57.7)
    # latency: hwLat NVLink 25 + 2 x log2(2) x (net 20.9)
    assert t["NVLSTree", "Simple"].latency == pytest.approx(25 + 2 * 20.9)
    assert ("NVLS", "Simple") not in t                 # NVLS across nodes needs CollNet
    assert choose(topo, "allreduce", 1 << 10)[:2] == ("Tree", "LL")
    assert choose(topo, "allreduce", 1 << 30)[:2] == ("NVLSTree", "Simple")
    # tree LL latency: 6.8 + 2 x (7 x 0.6 + 1 x 5.0)
    assert t["Tree", "LL"].latency == pytest.approx(6.8 + 2 * (7 * 0.6 + 5.0))


def test_channels_as_enqueue_cc_drops_them():
    topo = load("dgx-a100")
    # Simple: one channel per 512 x 64 B; LL rings: per 512 x 8 x 8 ranks
    assert channels_for(topo, "Ring", "Simple", 64 << 10)[0] == 2
    assert channels_for(topo, "Ring", "LL", 64 << 10)[0] == 2
    assert channels_for(topo, "Ring", "LL", 1 << 10)[0] == 1
    # a large call runs every channel of the communicator: twice the graph's 12
    assert channels_for(topo, "Ring", "Simple", 1 << 30)[0] == 24
    assert channels_for(topo, "Ring", "Simple", 12 * 512 * 64)[0] == 12


def test_communicator_runs_twice_the_graphs_channels():
    """connect.cc's ncclTopoPostset duplicates the graph's channels (comm->nChannels =
    min(MAXCHANNELS, 2 x nChannels): DGX A100's 24 coll channels of 12 graph rings); the
    Hopper rule for 4 compute channels per search channel across nodes needs a ring graph
    above 45 GB/s per channel; RCCL's (AMD) count stays its graph's."""
    for name, nodes in (("dgx-a100", None), ("dgx1", None), ("dgx-h100", 2), ("p4de", 2)):
        topo = load(name, nodes=nodes)
        assert comm_channels(topo) == 2 * ring_graph(topo).channels
    assert ring_graph(load("dgx-h100", nodes=2)).bw_intra <= 45.0
    mi = load("mi300x")
    assert channels_for(mi, "Ring", "Simple", 1 << 30)[0] == ring_graph(mi).channels


def test_forced_protocol_and_unknown_collective():
    topo = load("dgx-h100")
    assert choose(topo, "allreduce", 1 << 30, protocols=("LL",))[:2] == ("Ring", "LL")
    with pytest.raises(MscclError, match="no collective"):
        nccl_tune(topo, "gather")
    with pytest.raises(MscclError, match="runs no algorithm"):
        choose(topo, "allgather", 1 << 20, algorithms=("Tree",))


def test_pat_with_one_gpu_per_node():
    topo = load("dgx-h100", nodes=4, gpus_per_node=1)
    # one 400 Gb/s NIC per node: 48 GB/s (sm90SpeedArrayInter), doubled to 2 x 24
    assert ring_graph(topo).channels == 2
    t = nccl_tune(topo, "allgather")
    # PAT: busBw x 0.75, no algbw conversion; 8.0 + log2(4) x 14 / 3.5 + 4 ranks x 2.8
    assert t["PAT", "Simple"].bandwidth == pytest.approx(2 * 24 * 0.75)
    assert t["PAT", "Simple"].latency == pytest.approx(8.0 + 2 * 14 / 3.5 + 4 * 2.8)
    assert choose(topo, "allgather", 1 << 20)[:2] == ("PAT", "Simple")
    assert ("PAT", "Simple") not in nccl_tune(topo, "allreduce")
    assert ("PAT", "Simple") not in nccl_tune(load("dgx-h100", nodes=2), "allgather")


def test_network_plugin_latency_is_added_per_network_hop():
    # tuning.cc: interLat += latencyInter (the plugin's reported latency), once more for
    # Simple. aws-ofi-nccl reports 75 us on p4d; NCCL's IB transport (bm-gpu4, RoCE) 0.
    efa = nccl_tune(load("p4d", nodes=2), "allreduce")
    roce = nccl_tune(load("bm-gpu4", nodes=2), "allreduce")
    # tree: 2 x log2(2 nodes) = 2 network hops; ring allreduce: 2 (nodes - 1) = 2; the
    # ring's other 28 steps pay getNetOverhead where it exceeds the NVLink figure: 2 us on
    # bm-gpu4's AMD hosts against 1.9 (LL128), 6 against 3 on p4d's Intel ones (Simple)
    assert efa["Tree", "LL"].latency - roce["Tree", "LL"].latency == pytest.approx(2 * 75)
    assert efa["Ring", "LL128"].latency - roce["Ring", "LL128"].latency == \
        pytest.approx(2 * 75 - 28 * (2.0 - 1.9))
    assert efa["Ring", "Simple"].latency - roce["Ring", "Simple"].latency == \
        pytest.approx(2 * 2 * 75 - 28 * (6.0 - 3.4))
    # one node has no network hop, so nothing is added
    one = nccl_tune(load("p4d"), "allreduce")
    assert one["Tree", "LL"].latency == nccl_tune(load("dgx-a100"), "allreduce")[
        "Tree", "LL"].latency


def test_tcpxo_runs_without_ll_unless_forced():
    # Google's TCPXO NCCL profile sets NCCL_PROTO=Simple,LL128
    topo = load("a3-mega", nodes=2)
    assert choose(topo, "allreduce", 1024).protocol != "LL"
    assert choose(load("dgx-h100", nodes=2), "allreduce", 1024).protocol == "LL"
    assert choose(topo, "allreduce", 1024, protocols=("LL",)).protocol == "LL"


def test_two_node_tree_runs_at_its_raised_intra_speed():
    """search.cc's second pass raises a tree graph's speed within the node step by step
    (speedArrayInter) while it is below twice the network speed and the node's GPUs carry
    every channel at it; tuning.cc prices two-node trees at that bwIntra. p4de: 4 channels
    at 12 GB/s (one per 100 Gb/s EFA NIC) -> 15, 18, 20, 24 (< 2 x 12 stops there); the
    tree's algbw, 0.5 x 0.92 x 4 x 24 = 44.2 GB/s, beats the ring's 4 x 12 x 16/30 = 25.6,
    so NCCL runs the tree at large sizes (the published p4de run's 41 GB/s algbw at 2 GiB
    is above what a ring over 4 x 100 Gb/s carries)."""
    from msccl_py.tuning.nccl_model import tree_graph
    topo = load("p4de", nodes=2)
    ring, tree = ring_graph(topo), tree_graph(topo)
    assert (ring.channels, ring.bw_intra, ring.bw_inter) == (4, 12.0, 12.0)
    assert (tree.channels, tree.bw_intra, tree.bw_inter) == (4, 24.0, 12.0)
    t = nccl_tune(topo, "allreduce")
    assert t["Tree", "Simple"].bandwidth == pytest.approx(0.5 * 0.92 * 4 * 24)
    assert t["Ring", "Simple"].bandwidth == pytest.approx(4 * 12 * 16 / 30)
    assert choose(topo, "allreduce", 1 << 30)[:2] == ("Tree", "Simple")
    # the raise stops where the node's GPUs no longer carry it: a3-mega's 8 channels at
    # 24 GB/s rise to 45 (8 x 45 = 360 = the H100 ring budget, 12 x 30), not 48
    assert tree_graph(load("a3-mega", nodes=2)).bw_intra == 45.0
    # at 400 Gb/s per GPU the network speed is already the table's top: nothing to raise
    assert tree_graph(load("dgx-h100", nodes=2)) == ring_graph(load("dgx-h100", nodes=2))
    # one node and more than two nodes price trees at the ring graph's speeds
    assert tree_graph(load("p4de")) == ring_graph(load("p4de"))


def test_amd_hosts_take_llmaxbws_second_row_across_nodes():
    """tuning.cc: past one node llMaxBws's row is the CPU vendor's (AMD 22.5 GB/s at two
    nodes, 19.0 past; Intel 39.0, 20.4), on one node the GPU's; ring steps pay
    getNetOverhead (2 us on AMD, 1 on Intel; x3 Simple) where it exceeds the NVLink
    figure. DGX A100's hosts are AMD EPYC, p4d's Intel Xeon (their files' ``cpu``)."""
    amd, intel = load("dgx-a100", nodes=2), load("dgx-a100", nodes=2)
    intel.cpu_vendor = "intel"
    assert amd.cpu_vendor == "amd" and load("p4d").cpu_vendor == "intel"
    a, i = nccl_tune(amd, "allreduce"), nccl_tune(intel, "allreduce")
    # tree LL: 8 channels x 30 GB/s x 0.92 / 3.8 = 58, capped by the row
    assert a["Tree", "LL"].busbw == pytest.approx(22.5)
    assert i["Tree", "LL"].busbw == pytest.approx(39.0)
    assert nccl_tune(load("dgx-a100", nodes=4), "allreduce")["Tree", "LL"].busbw <= 19.0
    # ring LL: 16 ranks, 2 network steps, 28 others at max(0.6, overhead)
    assert a["Ring", "LL"].latency == pytest.approx(6.6 + 28 * 2.0 + 2 * 2.7)
    assert i["Ring", "LL"].latency == pytest.approx(6.6 + 28 * 1.0 + 2 * 2.7)
    one = nccl_tune(load("dgx-a100"), "allreduce")
    assert one["Ring", "LL"].busbw == pytest.approx(87.7)      # Ampere's own row on one node
