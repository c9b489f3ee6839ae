"""RCCL's own choices on AMD machines: its tuning model's protocol switch and the MSCCL
algorithms it ships."""

from __future__ import annotations

import pytest

from msccl_py.topologies import load
from msccl_py.tuning.nccl import nccl_choice, nccl_times
from msccl_py.tuning.rccl import amd_arch, msccl_pick, rccl_times, tuning_model


def test_the_platform_gives_the_tuning_model():
    assert (amd_arch(load("mi300x")), tuning_model(load("mi300x"))) == ("gfx942", 5)
    assert (amd_arch(load("mi250")), tuning_model(load("mi250"))) == ("gfx90a", 0)
    assert amd_arch(load("dgx-a100")) is None


def test_rccl_leaves_ll_for_simple_where_nccls_model_would_not():
    mi300x = load("mi300x")
    # RCCL: ring LL at 0.08 of Simple's bandwidth, 23.2 against 46.4 us of latency
    assert [nccl_choice("allreduce", s, mi300x)[1] for s in (256 << 10, 512 << 10)] == \
        ["LL", "Simple"]
    # NCCL's own figures (LL at half the bandwidth) would keep LL at 512 KiB
    ncclish = nccl_times("allreduce", 512 << 10, mi300x, ("Ring",))
    assert min(ncclish, key=ncclish.get) == ("Ring", "LL")
    times = rccl_times("allreduce", 512 << 10, mi300x)
    assert ("Tree", "Simple") not in times and ("Ring", "LL128") not in times


@pytest.mark.parametrize("nbytes,inplace,want", [
    (512, False, None),                       # 128 floats: not a multiple of 256 chunks
    (1 << 10, False, ("LL", 4)), (64 << 10, False, ("LL", 4)),
    (128 << 10, False, ("LL", 8)), (512 << 10, False, ("Simple", 8)),
    (16 << 20, False, ("Simple", 8)), (32 << 20, False, None),
    (12 << 20, True, None),                   # in place: a gap between two Simple files
])
def test_msccl_windows_on_8_mi300x(nbytes, inplace, want):
    got = msccl_pick("allreduce", nbytes, nbytes // 4, load("mi300x"), inplace)
    assert (got and (got.protocol, got.instances)) == (want or None)
    assert got is None or got.program == "allreduce_allpairs"


def test_no_msccl_elsewhere():
    assert msccl_pick("allreduce", 1 << 20, 1 << 18, load("mi250")) is None
    assert msccl_pick("allgather", 1 << 20, 1 << 18, load("mi300x")) is None
    assert msccl_pick("allreduce", 1 << 20, 1 << 18, load("dgx-a100")) is None


def test_bus_bandwidth_counts_one_link_of_a_multi_link_pair():
    """MI250's GCD pairs are joined by 4 xGMI links: RCCL's 36 GB/s width is per link, so
    its ring reaches well over one link's worth (it reached 36 GB/s busbw when the pair's
    four links were taken for one)."""
    from msccl_py.tuning.nccl import simulate_nccl
    r, = simulate_nccl("mi250", sizes=[1 << 30])
    assert r.algorithm == "Ring" and r.busbw_GBps > 100


def test_across_nodes_the_rings_run_at_the_graph_searchs_bandwidth():
    """tuning.cc: ``busBw = nChannels * (nNodes <= 2 ? bwIntra : bwInter)``, the search bounded
    by the NICs. Two MI300X nodes (8 NICs of 400 Gb/s each) run their rings near the NICs'
    400 GB/s, not at the xGMI rings' figure: the published AAC10 run reaches 357 GB/s busbw
    at 16 GiB (tests/data/nccl_tests/mi300x_2node_all_reduce_roce_aac10.txt)."""
    from msccl_py.tuning.nccl_model import ring_graph
    from msccl_py.tuning.rccl import rccl_entries
    two = load("mi300x", nodes=2)
    g = ring_graph(two)
    lat, bw = rccl_entries("allreduce", 1 << 34, two)["Ring", "Simple"]
    # ring allreduce moves 2 (n - 1) / n of the data per GPU: algorithm bw = bus x n / steps
    assert bw == pytest.approx(g.channels * g.bw_intra * 16 / 30)
    busbw = bw * 30 / 16
    assert 0.9 * 357.46 < busbw <= 8 * 50
