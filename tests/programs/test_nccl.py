"""The NCCL baselines on real machine files: rings over the machine's links, verified and run."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

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


# -- machines NCCL handles: slower bridges, switches next to direct links ----------------

MACHINES = sorted((Path(__file__).parent / "data").glob("*.topo"))


def _cut_bound_busbw(topo, nbytes: int) -> float:
    """Highest allreduce busbw any algorithm can reach: every cut S must pass |S|/n of the
    buffer out of S, at most S's egress bandwidth (direct links out of S, plus what the
    switch ports of S's members can send to the others)."""
    g = topo.graph
    n = topo.num_nodes()
    best = math.inf
    for k in range(1, n):
        for inside in itertools.combinations(range(n), k):
            s = set(inside)
            egress = sum(d["bw"] for a, b, d in g.edges(data=True)
                         if isinstance(a, int) and isinstance(b, int) and a in s
                         and b not in s and not d.get("via"))
            for sw in topo.devices("switch"):
                data = g.nodes[sw]
                ins = [r for r in data["gpus"] if r in s]
                outs = [r for r in data["gpus"] if r not in s]
                if ins and outs:
                    egress += min(len(ins), len(outs)) * data["port_bw"]
            t_us = k / n * nbytes / (egress * 1e3)
            best = min(best, nbytes / (t_us * 1e3))        # algbw, GB/s
    return best * 2 * (n - 1) / n


@pytest.mark.parametrize("path", MACHINES, ids=lambda p: p.stem)
def test_nccl_ring_builds_verifies_and_stays_under_the_cut_bound(path):
    from msccl_py.simulate import machine_model, simulate
    from msccl_py.topologies import load
    topo = load(path)
    alg = check_program("nccl_ring", 8, topology=str(path))
    for a, b in _peers(alg):
        assert topo.graph.has_edge(a, b), (a, b)       # every hop is a link or a switch path
    machine = machine_model(topo)
    for r in simulate(alg, machine, ["1MiB", "64MiB", "1GiB"]):
        assert 0 < r.busbw_GBps <= _cut_bound_busbw(topo, r.bytes) * (1 + 1e-9)
    assert _cut_bound_busbw(topo, 1 << 30) < 100                 # GB/s: a bound that bites
