"""The bandwidth bound against an independent computation: every cut, enumerated.

The reference reads the topology graph directly (links, switch ports and
totals, NICs) and, for every set of ranks, places each switch and the
network on whichever side gives the least egress; ``bound`` uses max-flows
on its own resource graph. They must agree within 1% on the machine files
and on the held-out shapes of ``synth_machines.py``.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from msccl_py.errors import MscclError
from msccl_py.synthesis import any_allreduce_bound, bound
from msccl_py.topologies import load, loads

from synth_machines import HELD_OUT

GIB = 1 << 30
FILES = ["dgx1", "dgx2", "dgx-a100", "dgx-h100", "hgx-h200", "mi250", "mi300x", "ndv2",
         "ndv4", "ndv5"]
CLUSTERS = [("dgx1", 2), ("ndv2", 2), ("dgx-a100", 2)]


def brute_force_ratio(topo, ingress: bool = False) -> float:
    """min over rank sets S (not empty, not all) of egress(S) / |S|, devices placed best."""
    n = topo.num_nodes()
    g = topo.graph
    masks = np.array(list(itertools.product([False, True], repeat=n)), dtype=bool)[1:-1]
    if ingress:  # ingress of S is the egress of the rest, in the reversed direction
        inside, outside = ~masks, masks
    else:
        inside, outside = masks, ~masks
    cut = np.zeros(len(masks))
    for u, v, data in g.edges(data=True):
        if isinstance(u, int) and isinstance(v, int) and not data.get("via"):
            cut += (inside[:, u] & outside[:, v]) * data["bw"]
    for dev in topo.devices("switch"):
        sw = g.nodes[dev]
        members = list(sw["gpus"])
        port = sw["port_bw"]
        out_port = inside[:, members].sum(axis=1) * port     # switch outside: ports out
        in_port = outside[:, members].sum(axis=1) * port     # switch inside: ports in
        options = [out_port, in_port]
        if sw.get("total_bw"):   # the total sits between the switch's in and out halves
            options.append(np.full(len(masks), float(sw["total_bw"])))
        cut += np.min(options, axis=0)
    if topo.devices("fabric"):
        best = {}
        for r in range(n):
            nics = topo.nics_of(r)
            if nics:
                nic = max(nics, key=lambda d: g.nodes[d]["bw"])
                best.setdefault(nic, []).append(r)
        fabric_out = sum(np.any(inside[:, rs], axis=1) * g.nodes[nic]["bw"]
                         for nic, rs in best.items())
        fabric_in = sum(np.any(outside[:, rs], axis=1) * g.nodes[nic]["bw"]
                        for nic, rs in best.items())
        cut += np.minimum(fabric_out, fabric_in)
    count = (outside if ingress else inside).sum(axis=1)
    return float((cut / count).min())


def reference(topo, collective: str) -> float:
    """Every cut tried; an allreduce on a machine whose switch reduces (NVLS) is bounded
    by n x the allgather cut ratio on one machine (the switch sums, the GPUs only send
    their data in and take the sum out)."""
    from msccl_py.topologies.gpus import nvls_switch
    n = topo.num_nodes()
    ag = n * brute_force_ratio(topo)
    rs = n * brute_force_ratio(topo, ingress=True)
    allreduce = 1.0 / (1.0 / ag + 1.0 / rs)
    if nvls_switch(topo) is not None and (getattr(topo, "num_machines", 1) or 1) == 1:
        allreduce = max(allreduce, ag)
    return {"allgather": ag, "reduce_scatter": rs, "allreduce": allreduce}[collective]


#: 16 ranks (65,534 cuts each, a few seconds apiece) and machines another file repeats
SLOW = {"dgx2", "dgx1x2", "ndv2x2", "dgx-a100x2", "torus4x4", "ndv4", "ndv5", "hgx-h200",
        "dgx-h100", "chords12", "boxes3x4"}


def machines():
    for name in FILES:
        yield name, lambda name=name: load(name)
    for name, k in CLUSTERS:
        yield f"{name}x{k}", lambda name=name, k=k: load(name, nodes=k)
    yield from HELD_OUT.items()


@pytest.mark.parametrize("name,make", [
    pytest.param(name, make, marks=pytest.mark.slow) if name in SLOW else (name, make)
    for name, make in machines()], ids=[m for m, _ in machines()])
def test_bound_agrees_with_every_cut(name, make):
    topo = make()
    for collective in ("allgather", "reduce_scatter", "allreduce"):
        b = bound(topo, collective)
        ref = reference(topo, collective)
        assert b.algbw_GBps == pytest.approx(ref, rel=0.01), (name, collective)


def test_the_named_cut_sets_the_bound():
    topo = HELD_OUT["boxes2x4"]()
    b = bound(topo, "allgather")
    cut = b.cuts[0]
    # two 25 GB/s bridges carry one box's four ranks out: 100 GB/s algbw over 8 ranks
    assert sorted(cut.ranks) in ([0, 1, 2, 3], [4, 5, 6, 7])
    assert cut.bandwidth_GBps == pytest.approx(50.0)
    assert b.algbw_GBps == pytest.approx(8 * 50.0 / 4)
    assert b.busbw_GBps == pytest.approx(b.algbw_GBps * 7 / 8)


def test_reduce_scatter_is_the_bound_of_ingress():
    # rank 0 has a fast way out and a slow way in (2 x 10 GB/s): allgather must bring two
    # ranks' data into it, reduce-scatter only its own block's partial sums
    topo = loads("machine skew { gpus 3 linktype f 100 GB/s linktype s 10 GB/s "
                 "link 0 -> 1 f link 0 -> 2 f link 1 -> 0 s link 2 -> 0 s "
                 "link 1 <-> 2 f }")
    ag, rs = bound(topo, "allgather"), bound(topo, "reduce_scatter")
    assert (ag.cut, ag.cuts[0].bandwidth_GBps) == ((1, 2), 20.0)
    assert (rs.cut, rs.cuts[0].direction) == ((0,), "ingress")
    assert ag.algbw_GBps == pytest.approx(3 * 20.0 / 2)
    assert rs.algbw_GBps == pytest.approx(3 * 20.0 / 1)
    ar = bound(topo, "allreduce")
    assert 1 / ar.algbw_GBps == pytest.approx(1 / ag.algbw_GBps + 1 / rs.algbw_GBps)


def test_json_keys_and_time():
    b = bound("dgx-a100", "allreduce")
    d = b.as_dict(1 << 30)
    assert {"algbw_GBps", "busbw_GBps", "cut"} <= set(d)
    assert d["busbw_GBps"] == pytest.approx(300.0)     # 2(n-1)/n of 171.43
    assert d["time_us"] == pytest.approx((1 << 30) / (d["algbw_GBps"] * 1e3))
    assert len(d["cuts"]) == 2


def test_errors_name_the_problem():
    with pytest.raises(MscclError, match="link counts"):
        bound("amd4", "allgather")
    with pytest.raises(MscclError, match="no bandwidth bound for collective 'broadcast'"):
        bound("dgx1", "broadcast")
    cut_off = loads("machine split { gpus 4 linktype l 10 GB/s link 0 <-> 1 l link 2 <-> 3 l }")
    with pytest.raises(MscclError, match="cannot reach"):
        bound(cut_off, "allgather")


# -- allreduce in any form (msccl_py.synthesis.anyform) --------------------------------

@pytest.mark.parametrize("name", ["dgx1", "dgx-a100", "mi250", "mi300x", "torus3x3",
                                  "chords8", "boxes2x4", "swboxes", "nicbox-x3"])
def test_any_form_bound_is_the_sum_where_every_rank_is_alike_both_ways(name):
    # links as fast both ways and the phases limited by the same resources: the
    # reduce-scatter + allgather sum is also the bound of every other form
    topo = HELD_OUT[name]() if name in HELD_OUT else load(name)
    assert any_allreduce_bound(topo).algbw_GBps == pytest.approx(
        bound(topo, "allreduce").algbw_GBps, rel=1e-6)


def test_any_form_bound_counts_the_switchs_own_sums():
    # one DGX H100: NVLS's switch adds, so the bound is the allgather cut's n x 450/7 GB/s
    # (busbw 900), and NCCL's NVLS (predicted near 460 busbw) stays under it; without the
    # switch's sums the links bound copies and additions at 257.1 GB/s
    b = any_allreduce_bound("dgx-h100")
    assert (b.method, b.busbw_GBps) == ("in-switch reduction", pytest.approx(900.0))
    plain = any_allreduce_bound("dgx-h100", in_switch=False)
    assert plain.algbw_GBps == pytest.approx(257.14, abs=0.01)
    from msccl_py.tuning.nccl_sim import simulate_nccl
    nvls, = simulate_nccl("dgx-h100", sizes=[GIB])
    assert nvls.algorithm == "NVLS" and GIB / nvls.time_us / 1e3 > plain.algbw_GBps
    assert GIB / nvls.time_us / 1e3 <= b.algbw_GBps


def test_any_form_bound_by_hand():
    # three boxes in a line, one 25 GB/s bridge between neighbours: the middle box's
    # bridges are a cut of 25 GB/s each way (M / 25 at least); grouping by box, one
    # element needs 2 * (3 - 1) messages between boxes over 4 x 25 GB/s: M / 25 again.
    # The sum of the phase bounds (18.75 GB/s algbw) is lower: the phases overlap
    topo = HELD_OUT["boxes3x4"]()
    b = any_allreduce_bound(topo)
    assert b.algbw_GBps == pytest.approx(25.0)
    assert bound(topo, "allreduce").algbw_GBps == pytest.approx(18.75)
    # GPU 2 of mixed8 has one 32 GB/s switch port each way and nothing else
    assert any_allreduce_bound(HELD_OUT["mixed8"]()).algbw_GBps == pytest.approx(32.0)
    # a ring of 4 at 10 GB/s each way: 2 (N - 1) messages per element over 8 link
    # directions of 10 GB/s: 80 / 6 GB/s, the sum of the phase bounds
    ring = loads("machine r4 { gpus 4 linktype l 10 GB/s link 0 <-> 1 l link 1 <-> 2 l "
                 "link 2 <-> 3 l link 3 <-> 0 l }")
    assert any_allreduce_bound(ring).algbw_GBps == pytest.approx(80 / 6)


def test_any_form_bound_on_one_way_links():
    # a one-way ring: the cut {0} has 10 GB/s out and in; gossip needs 2 (N - 1) = 4
    # messages per element over 3 x 10 GB/s, so at most 7.5 GB/s
    topo = loads("machine oneway { gpus 3 linktype l 10 GB/s link 0 -> 1 l link 1 -> 2 l "
                 "link 2 -> 0 l }")
    assert any_allreduce_bound(topo).algbw_GBps == pytest.approx(7.5)


@pytest.mark.parametrize("name, nodes", [("dgx-h100", 3), ("dgx1", None), ("mi300x", 2),
                                         ("p4de", 2)])
def test_rank_distances_are_the_shortest_paths(name, nodes):
    """The all-ranks-at-once search gives every rank's Dijkstra distances, for both
    0/1 length families the bound tries."""
    import networkx as nx
    from msccl_py.synthesis import anyform
    from msccl_py.synthesis.flowgraph import flow_graph, ranks_of
    g = flow_graph(load(name, nodes=nodes) if nodes else load(name))
    finite = [(u, v) for u, v, c in g.edges(data="capacity", default=None) if c is not None]
    ranks = ranks_of(g)
    for lengths in (dict.fromkeys(finite, 1.0),
                    {(u, v): 1.0 for u, v in finite if isinstance(u, int) or isinstance(v, int)}):
        h = nx.DiGraph()
        h.add_weighted_edges_from((u, v, lengths.get((u, v), 0.0)) for u, v in g.edges)
        got = anyform._rank_distances(g, lengths)
        for i, r in enumerate(ranks):
            reach = nx.single_source_dijkstra_path_length(h, r)
            assert list(got[i]) == [reach.get(s, np.inf) for s in ranks]
