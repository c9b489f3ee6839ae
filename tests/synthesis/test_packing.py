"""Tree and ring packings reach the cut bound, and their trees are what they say."""

from __future__ import annotations

import numpy as np
import pytest

from msccl_py.synthesis import bound
from msccl_py.synthesis.hops import hops
from msccl_py.synthesis.integral import whole_counts
from msccl_py.synthesis.packing import Tree, pack, tree_load
from msccl_py.synthesis.rings import disjoint_rings, pack_rings
from msccl_py.topologies import load, loads

from synth_machines import HELD_OUT, topology_file


@pytest.mark.parametrize("name", ["mi250", "boxes2x4"] + [
    pytest.param(n, marks=pytest.mark.slow) for n in ("dgx1", "mixed8", "chords8")])
def test_tree_packing_reaches_the_bound(highs, name):
    topo = HELD_OUT[name]() if name in HELD_OUT else load(name)
    h = hops(topo)
    for collective, kinds in (("allgather", ("out",)), ("reduce_scatter", ("in",))):
        p = pack(h, kinds)
        assert h.ranks / p.time == pytest.approx(bound(topo, collective).algbw_GBps, rel=1e-6)
        for t, w in zip(p.trees, p.weights):
            assert t.kind == kinds[0] and w > 0
            assert sorted(v for v, par in enumerate(t.parent) if par < 0) == [t.root]
            assert len(t.arcs()) == h.ranks - 1
            assert all(h.index[a, b] >= 0 for a, b in t.arcs())
        loads = sum(w * tree_load(h, t) for t, w in zip(p.trees, p.weights))
        assert (loads <= h.capacity * p.time * (1 + 1e-6)).all()


def test_allreduce_packing_is_reduce_scatter_plus_allgather_on_symmetric_links(highs):
    h = hops("mi250")
    p = pack(h, ("in", "out"))
    assert h.ranks / p.time == pytest.approx(bound("mi250", "allreduce").algbw_GBps, rel=1e-6)


def test_trees_list_the_deepest_child_first():
    # 0 -> 1 -> 2 -> 3 and 0 -> 4: the long branch streams (the first child an out tree
    # forwards to, the last one an in tree reduces)
    t = Tree(0, "out", (-1, 0, 1, 2, 0))
    assert t.levels() == [[1, 4], [2], [3]]
    assert t.arcs()[0] == (0, 1)
    rs = Tree(0, "in", t.parent)
    assert rs.arcs()[-2:] == [(1, 0), (4, 0)] or rs.arcs()[-2:] == [(4, 0), (1, 0)]
    assert rs.arcs()[0] == (3, 2)   # leaves first


def test_rings_on_machines_that_split_into_cycles(highs):
    assert len(disjoint_rings(hops("dgx1"))) == 6
    torus = HELD_OUT["torus3x3"]()
    p = pack_rings(hops(torus))
    assert 9 / p.time == pytest.approx(bound(torus, "allgather").algbw_GBps, rel=1e-6)
    assert disjoint_rings(hops("dgx-a100")) == []   # switch ports are shared: no rings


def test_whole_counts_keep_each_demand_whole(highs):
    p = pack(hops("mi250"), ("out",))
    loads = np.array([tree_load(p.hops, t) for t in p.trees])
    groups: dict = {}
    for i, t in enumerate(p.trees):
        groups.setdefault(t.root, []).append(i)
    r = whole_counts(loads, list(groups.values()), p.hops.capacity, 5, p.weights)
    assert all(r.counts[idx].sum() == 5 for idx in groups.values())
    assert r.time >= p.time * (1 - 1e-9)


def test_paths_stream_every_hop_and_pack_a_chorded_ring(highs):
    # 12 ranks in a ring with diameter chords: no three disjoint Hamiltonian cycles, but
    # Hamiltonian paths per root pack it to the bound, every rank with one child
    from msccl_py.synthesis.paths import pack_paths
    path, _ = topology_file("chords12")
    h = hops(load(path))
    p = pack_paths(h, ("out",))
    assert p.time == pytest.approx(h.ranks / bound(load(path), "allgather").algbw_GBps,
                                   rel=1e-6)
    for t in p.trees:
        assert sorted(t.parent).count(-1) == 1 and t.depth() == h.ranks - 1
    reduced = pack_paths(h, ("in",))
    assert {t.kind for t in reduced.trees} == {"in"}
    assert all(t.depth() == h.ranks - 1 for t in reduced.trees)


def test_no_paths_where_a_root_starts_none(highs):
    # a star: no Hamiltonian path from a leaf
    from msccl_py.synthesis.paths import pack_paths
    star = loads("machine star { gpus 4 linktype l 10 GB/s link 0 <-> 1 l link 0 <-> 2 l "
                 "link 0 <-> 3 l }")
    assert pack_paths(hops(star), ("out",)) is None
