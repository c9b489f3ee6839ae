"""The NCCL baselines on real machine files: rings over the machine's links, verified and run."""

from __future__ import annotations

import pytest

from harness import check_program


def _peers(alg):
    return {(g.rank, tb.send_peer) for g in alg.gpus for tb in g.threadblocks if tb.send_peer >= 0}


def test_nccl_ring_on_mi300x_sends_over_all_seven_links():
    alg = check_program("nccl_ring", 8, topology="mi300x")
    assert alg.nchannels == 7
    assert _peers(alg) == {(a, b) for a in range(8) for b in range(8) if a != b}


def test_nccl_ring_on_dgx1_uses_only_nvlink_pairs():
    from msccl_py.topologies import load
    topo = load("dgx1")
    alg = check_program("nccl_ring", 8, protocol="LL128", topology="dgx1")
    assert alg.nchannels == 6
    assert all(topo.link(a, b) > 0 for a, b in _peers(alg))


@pytest.mark.parametrize("name", ["nccl_ring_allgather", "nccl_ring_reduce_scatter"])
def test_nccl_ring_collectives_on_a_switch(name):
    alg = check_program(name, 8, topology="dgx-a100", rings=4)
    assert alg.nchannels == 4


def test_nccl_tree_across_two_nodes():
    alg = check_program("nccl_tree", 16, topology="ndv5", nodes=2, trees=2)
    assert alg.nchannels == 2
    # the heads of the two nodes exchange data; no other pair crosses the network
    crossing = {(a, b) for a, b in _peers(alg) if a // 8 != b // 8}
    assert crossing and all(a % 8 in (0, 1) and b % 8 in (0, 1) for a, b in crossing)


@pytest.mark.parametrize("name,n,params,steps", [
    ("nccl_ring", 8, {}, 14), ("nccl_ring_allgather", 8, {}, 7),
    ("nccl_ring_reduce_scatter", 8, {}, 7), ("nccl_tree", 8, {}, 14),
    ("nccl_tree", 16, {"topology": "ndv5", "nodes": 2}, 16)])
def test_step_counts(name, n, params, steps):
    from msccl_py import library
    from msccl_py.analysis import critical_path
    assert critical_path(library.compile(name, n, use_cache=False, **params)).length == steps
