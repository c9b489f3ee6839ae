"""Bounds on leaf/spine fabrics, and the shortcuts that keep them exact at scale."""

from __future__ import annotations

import importlib

import pytest

import msccl_py.synthesis.anyform as anyform
from msccl_py.synthesis import bound
from msccl_py.synthesis.flowgraph import flow_graph, ranks_of, sinks_of
from msccl_py.topologies import load, loads

#: the module (the package exports the function under the same name)
bound_mod = importlib.import_module("msccl_py.synthesis.bound")
# 6 DGX H100: a group of 4 and a group of 2 on one rail fabric
CLUSTER = "cluster c {{ machine dgx-h100 nodes 6 fabric rail group 4 spines 2 " \
          "oversubscription {os} }}"


def test_heavy_oversubscription_puts_the_spines_in_the_cut():
    b = bound(loads(CLUSTER.format(os=16)), "allgather")
    cut, = b.cuts
    assert any(name.startswith("spine") for name in cut.switches)
    assert any(name.startswith("leaf") for name in cut.switches)
    # the short group's leaves take 2 machines x 50 GB/s / 16 each, 8 rails: 50 GB/s in
    assert cut.bandwidth_GBps == pytest.approx(50.0)
    # without oversubscription the NICs into one machine bind, as on one switch
    flat = bound(loads(CLUSTER.format(os=1)), "allgather")
    assert flat.cuts[0].switches == () and flat.algbw_GBps > 6 * b.algbw_GBps


def test_alltoall_bound_by_hand_and_the_spines_it_names():
    # alltoall: a set of a of N ranks sends a (N - a) pieces of size / N out of itself.
    # One machine: 400 GB/s of NICs for 8 x 40 pieces. The short group (2 machines, 16 ranks)
    # at 2:1: 8 leaves of 2 x 50 / 2 GB/s up for 16 x 32 pieces: it binds, over the spines
    N = 48
    flat = bound(loads(CLUSTER.format(os=1)), "alltoall")
    assert flat.algbw_GBps == pytest.approx(N * 400 / (8 * 40))
    assert len(flat.cut) == 8 and flat.cuts[0].switches == ()
    over = bound(loads(CLUSTER.format(os=2)), "alltoall")
    assert over.algbw_GBps == pytest.approx(N * 400 / (16 * 32))
    assert over.cut in (tuple(range(32)), tuple(range(32, 48)))   # one cut, either side
    assert any(name.startswith("spine") for name in over.cuts[0].switches)


def test_simulated_nccl_alltoall_stays_under_its_bound():
    from msccl_py.tuning.nccl_sim import simulate_nccl
    for text in (CLUSTER.format(os=1), CLUSTER.format(os=2)):
        topo = loads(text)
        b = bound(topo, "alltoall")
        run, = simulate_nccl(topo, "alltoall", sizes=[1 << 30])
        assert (1 << 30) / (run.time_us * 1e3) <= b.algbw_GBps * (1 + 1e-9)


def test_one_sink_per_machine_kind_gives_the_all_ranks_bound(monkeypatch):
    topo = loads(CLUSTER.format(os=16))
    assert len(sinks_of(flow_graph(topo))) == 3 * 8   # machines 0, 1 (its group) and 4
    fast = bound(topo, "allreduce")
    monkeypatch.setattr(bound_mod, "sinks_of", ranks_of)
    slow = bound(topo, "allreduce")
    assert fast.algbw_GBps == pytest.approx(slow.algbw_GBps)
    assert [c.bandwidth_GBps for c in fast.cuts] == pytest.approx(
        [c.bandwidth_GBps for c in slow.cuts])


@pytest.mark.parametrize("name, nodes", [("mi250", None), ("ndv2", 3), ("dgx-a100", 3)])
def test_any_form_spanning_tree_without_the_distance_matrix(monkeypatch, name, nodes):
    monkeypatch.setattr(anyform, "LEVELS_ABOVE", 10**9)
    monkeypatch.setattr(anyform, "MEHLHORN_ABOVE", 0)
    fast = anyform.any_allreduce_bound(name, nodes=nodes)
    monkeypatch.setattr(anyform, "MEHLHORN_ABOVE", 10**9)
    matrix = anyform.any_allreduce_bound(name, nodes=nodes)
    assert (fast.algbw_GBps, fast.method) == (pytest.approx(matrix.algbw_GBps), matrix.method)


def test_cluster_any_form_bound_is_the_machine_cut_at_sixteen_nodes():
    # 16 DGX H100: each machine's 8 NICs (400 GB/s) must carry 2 x 120/128 of the buffer
    b = anyform.any_allreduce_bound(load("dgx-h100", nodes=16))
    assert b.algbw_GBps == pytest.approx(400 * 128 / 240)


def test_allreduce_with_in_switch_sums_still_pays_the_uplinks():
    # summing inside machines (NVLS) does not lift the uplinks: the group of 2 machines
    # takes the whole buffer each way through 8 rails x 2 x 50 GB/s / 16 = 50 GB/s
    b = bound(loads(CLUSTER.format(os=16)), "allreduce")
    assert b.algbw_GBps == pytest.approx(50.0)
    assert any(name.startswith("spine") for name in b.cuts[-1].switches)
