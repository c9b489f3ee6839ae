"""The fast path: ranks a verified symmetry makes alike are timed once, and agree with
``exact`` (every rank timed) on every library program, on uniform and rail fabrics."""

from __future__ import annotations

import pytest

from msccl_py import ir, library
from msccl_py.errors import MscclError
from msccl_py.plan.tables import plan_for
from msccl_py.simulate import machine_model, quotient, simulate
from msccl_py.topologies import load, loads

SIZES = "1KiB,1MiB,64MiB,1GiB"
#: K DGX H100 in rail leaf groups of 2 machines, 2 spines, a switch hop of 0.3 us
RAIL = "cluster rail{k} {{ machine dgx-h100 nodes {k} fabric rail group 2 spines 2 " \
       "oversubscription {os} hop 0.3 us }}"


def agree(alg, m) -> tuple[float, bool]:
    """(worst relative time difference, labels equal) of the fast path against exact."""
    fast = simulate(alg, m, SIZES)
    exact = simulate(alg, m, SIZES, exact=True)
    worst = max(abs(a.time_us / b.time_us - 1) for a, b in zip(fast, exact))
    return worst, [a.bottleneck for a in fast] == [b.bottleneck for b in exact]


def test_a_ring_across_nodes_is_timed_one_node_for_all():
    m = machine_model(load("dgx-h100", nodes=2))
    alg = library.compile("allreduce_ring", 16)
    q = quotient(plan_for(alg), m, alg.protocol)
    assert q is not None and q.symmetries == ("node shift by 1",)
    assert (q.classes, q.ranks) == (8, 16)
    assert q.plan.nsteps * 2 == plan_for(alg).nsteps
    assert agree(alg, m) == (0.0, True)


def test_all_pairs_on_switched_nodes_is_timed_on_one_rank():
    m = machine_model(load("dgx-h100", nodes=2))
    alg = library.compile("allgather_allpairs", 16)
    q = quotient(plan_for(alg), m, alg.protocol)
    assert q is not None and q.classes == 1
    worst, labels = agree(alg, m)
    assert worst < 1e-9 and labels


def test_recursive_doubling_pairs_ranks_by_xor():
    m = machine_model(load("dgx-h100", nodes=2))
    alg = library.compile("allreduce_recursive_halving_doubling", 16)
    q = quotient(plan_for(alg), m, alg.protocol)
    assert q is not None and q.classes == 1
    assert q.symmetries == ("GPU xor 1", "GPU xor 2", "GPU xor 4", "node shift by 1")
    worst, labels = agree(alg, m)
    assert worst < 1e-9 and labels


def test_hierarchical_allreduce_keeps_one_rank_per_node():
    # across nodes a ring per rail: node m starts it with piece m, which its node's ring
    # finished at another time than node 0's, so only the GPU rotation holds
    m = machine_model(load("dgx-h100", nodes=4))
    alg = library.compile("allreduce_hierarchical", 32, inter="ring")
    q = quotient(plan_for(alg), m, alg.protocol)
    assert q is not None and q.symmetries == ("GPU rotation",) and q.classes == 4
    assert agree(alg, m) == (0.0, True)
    # across nodes a double binary tree: no node is like another, every rank is timed
    tree = library.compile("allreduce_hierarchical", 32)
    assert quotient(plan_for(tree), m, tree.protocol) is None
    assert agree(tree, m) == (0.0, True)


def test_a_rail_fabric_shifts_by_leaf_groups_where_single_nodes_differ():
    # each rail's ring across nodes stays on its leaf inside a group of 2 machines and
    # crosses a spine between groups: a shift by one node is no symmetry, by a group is
    m = machine_model(loads(RAIL.format(k=4, os=2)))
    alg = library.compile("allgather_hierarchical", 32, inter="ring")
    q = quotient(plan_for(alg), m, alg.protocol)
    assert q is not None and q.symmetries == ("GPU rotation", "node shift by 2")
    assert q.classes == 2
    worst, labels = agree(alg, m)
    assert worst < 1e-9 and labels
    flat = machine_model(load("dgx-h100", nodes=4))
    assert quotient(plan_for(alg), flat, alg.protocol).symmetries == (
        "GPU rotation", "node shift by 1")


def test_a_rank_doing_more_breaks_the_symmetry():
    m = machine_model(load("dgx-h100", nodes=2))
    alg = library.compile("allgather_allpairs", 16, use_cache=False)
    alg.gpus[3].threadblocks[0].steps[0].count += 1
    plan = plan_for(alg, refresh=True)
    assert quotient(plan, m, alg.protocol) is None
    worst, labels = agree(alg, m)
    assert worst == 0.0 and labels


def test_a_slower_link_breaks_the_symmetry():
    ring = ("machine r {{ gpus 4 linktype l 100 GB/s latency 0.5 us linktype s {bw} GB/s "
            "latency 0.5 us link 0 <-> 1 s link 1 <-> 2 l link 2 <-> 3 l link 3 <-> 0 l }}")
    alg = library.compile("allgather_ring", 4)
    even = machine_model(loads(ring.format(bw=100)))
    q = quotient(plan_for(alg), even, alg.protocol)
    assert q is not None and q.classes == 1
    slow = machine_model(loads(ring.format(bw=50)))
    assert quotient(plan_for(alg), slow, alg.protocol) is None
    fast, = simulate(alg, slow, "1GiB")
    assert fast.time_us == simulate(alg, slow, "1GiB", exact=True)[0].time_us
    assert fast.time_us > 1.5 * simulate(alg, even, "1GiB")[0].time_us


def test_a_dependency_on_another_block_must_map_too():
    # two ranks, two blocks each; rank 1's second block waits on its first, rank 0's not
    def gpu(r: int, wait: bool) -> ir.Gpu:
        peer = 1 - r
        send = ir.Threadblock(0, send_peer=peer, steps=[
            ir.Step("send", ir.Loc("i", 0), ir.Loc("o", 0), has_dependents=True)])
        recv = ir.Threadblock(1, recv_peer=peer, steps=[
            ir.Step("recv", ir.Loc("i", 0), ir.Loc("o", 0),
                    depends=[(0, 0)] if wait else [])])
        return ir.Gpu(r, 1, 1, 0, [send, recv])

    m = machine_model(loads("machine p { gpus 2 linktype l 10 GB/s link 0 <-> 1 l }"))
    same = ir.Algorithm("p", "custom", "Simple", False, 2, 1, 1, [gpu(0, True), gpu(1, True)])
    assert quotient(plan_for(same), m, "Simple").classes == 1
    odd = ir.Algorithm("p", "custom", "Simple", False, 2, 1, 1, [gpu(0, False), gpu(1, True)])
    assert quotient(plan_for(odd), m, "Simple") is None


def test_traces_time_every_rank():
    m = machine_model(load("dgx-h100", nodes=2))
    alg = library.compile("allreduce_ring", 16)
    timings: list = []
    simulate(alg, m, "1MiB", timings=timings)
    assert len(timings[0].ends[0]) == plan_for(alg).nsteps


def _library_cases(ranks: int, machine: dict):
    """Every library program that builds at ``ranks``; NCCL's baselines built for
    ``machine`` (``topology``, ``nodes``) where it is a named machine."""
    for name in library.names():
        params = machine if name.startswith("nccl_") else {}
        try:
            yield name, library.compile(name, ranks, **params)
        except MscclError:       # a program that has no build at this rank count
            continue


@pytest.mark.slow
@pytest.mark.parametrize("fabric", ["dgx-h100", "dgx-a100", "rail"])
@pytest.mark.parametrize("nodes", [2, 4, 8])
def test_fast_path_agrees_with_exact_on_every_library_program(fabric, nodes):
    if fabric == "rail":
        m, named = machine_model(loads(RAIL.format(k=nodes, os=2))), {}
    else:
        m, named = machine_model(load(fabric, nodes=nodes)), {"topology": fabric,
                                                               "nodes": nodes}
    seen = 0
    for name, alg in _library_cases(m.ngpus, named):
        worst, labels = agree(alg, m)
        assert worst < 1e-6, (name, worst)
        assert labels, name
        seen += 1
    assert seen >= 25
