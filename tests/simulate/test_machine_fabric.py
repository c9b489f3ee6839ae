"""The machine model on a leaf/spine fabric: paths cross leaf up, spine, leaf down."""

from __future__ import annotations

import pytest

from msccl_py import library
from msccl_py.simulate import machine_model, simulate
from msccl_py.topologies import load, loads

# 8 DGX H100 in leaf groups of 2; the fabric's hop latency 0.5 us (large, to be seen)
FABRIC = "cluster c {{ machine dgx-h100 nodes 8 fabric rail group 2 spines 2 " \
         "oversubscription {os} hop 0.5 us }}"


def test_paths_cross_the_fabric_resources_with_their_hop_latency():
    m = machine_model(loads(FABRIC.format(os=1)))
    same_leaf = m.path(0, 8)          # rail 0 of machines 0 and 1: one leaf
    assert [m.resources[k].name for k in same_leaf.resources] == [
        "nic ib0@0 out", "nic ib0@1 in"]
    assert same_leaf.alpha_us == pytest.approx(2.7 + 0.5)
    other_group = m.path(0, 16)       # machine 2 is in the next group: leaf, spine, leaf
    names = [m.resources[k].name for k in other_group.resources]
    assert names[0] == "nic ib0@0 out" and names[-1] == "nic ib0@2 in"
    assert names[1:4] == ["leaf g0/r0 up", names[2], "leaf g1/r0 down"]
    assert names[2].startswith("spine ")
    assert other_group.alpha_us == pytest.approx(2.7 + 3 * 0.5)
    up = m.resources[other_group.resources[1]]
    assert up.bw_GBps == pytest.approx(2 * 50.0)     # two machines' rail 0, non-blocking


def test_flat_clusters_keep_their_paths():
    m = machine_model(load("dgx-h100", nodes=4))
    p = m.path(0, 24)
    assert [m.resources[k].name for k in p.resources] == ["nic ib0@0 out", "nic ib0@3 in"]
    assert p.alpha_us == pytest.approx(2.7)


def test_oversubscription_slows_what_crosses_the_spines():
    # every rank of a group sends across it at the far steps: 2:1 above the leaf halves them
    alg = library.compile("allreduce_recursive_halving_doubling", 64)
    full, = simulate(alg, machine_model(loads(FABRIC.format(os=1))), "1GiB")
    half, = simulate(alg, machine_model(loads(FABRIC.format(os=2))), "1GiB")
    assert half.time_us > 1.05 * full.time_us
    assert "leaf" in half.bottleneck or "spine" in half.bottleneck
