"""Topology: the MSCCLang matrix API and the graph queries built on it."""

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from msccl_py.errors import TopologyError
from msccl_py.topologies import Topology, fully_connected, line, load, reverse_topology, ring


def test_msccl_constructor_keeps_links_dst_src():
    t = Topology("asym", [[0, 3, 0], [1, 0, 0], [0, 2, 0]])
    assert t.links == [[0, 3, 0], [1, 0, 0], [0, 2, 0]]
    assert t.link(1, 0) == 3          # links[dst=0][src=1]
    assert t.link(0, 1) == 1
    assert t.link(2, 0) == 0
    assert list(t.sources(0)) == [1]
    assert list(t.destinations(1)) == [0, 2]
    assert t.num_nodes() == 3 and list(t.nodes()) == [0, 1, 2]
    assert t.graph.edges[1, 0]["count"] == 3


def test_bandwidth_constraints_match_msccl_order():
    t = Topology("s", [[0, 1], [2, 0]], [([0], [1], 5, "sw")])
    assert list(t.bandwidth_constraints()) == [([1], [0], 1, "1→0"), ([0], [1], 2, "0→1"),
                                               ([0], [1], 5, "sw")]


@pytest.mark.parametrize("links, message", [
    ([[0, 1], [1]], "square"),
    ([[0, -1], [1, 0]], "links[0][1] = -1.0"),
    ([[0, "x"], [1, 0]], "numbers"),
])
def test_bad_matrix(links, message):
    with pytest.raises(TopologyError, match=message.replace("[", r"\[").replace("]", r"\]")):
        Topology("bad", links)


@pytest.mark.parametrize("switch, message", [
    (([0], [1], 0, "z"), "switch z has bandwidth 0"),
    (([0], [1], -2, "n"), "switch n has bandwidth -2"),
    (([0], [7], 1, "far"), "names rank 7"),
    (([0], [1]), "must be"),
])
def test_bad_switch(switch, message):
    with pytest.raises(TopologyError, match=message):
        Topology("bad", [[0, 1], [1, 0]], [switch])


def test_rank_checks_name_the_topology():
    with pytest.raises(TopologyError, match="rank 5 out of range for topology 'Ring.n=4.' with 4"):
        ring(4).link(0, 5)


def test_route_and_hops_on_a_line():
    t = line(5)
    assert t.rank_route(0, 4) == [0, 1, 2, 3, 4]
    assert t.route(4, 1) == [4, 3, 2, 1]
    assert t.hops(0, 4) == 4
    assert t.diameter() == 4


def test_disconnected_pairs_are_reported():
    t = Topology("two islands", [[0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0]])
    assert t.rank_route(0, 2) is None
    assert t.diameter() is None
    assert not t.connected()
    assert t.connected([(0, 1), (3, 2)])
    assert t.unreachable([(0, 1), (1, 3)]) == [(1, 3)]
    with pytest.raises(TopologyError, match="no path from rank 0 to rank 3"):
        t.route(0, 3)


def test_route_agrees_with_networkx_shortest_paths():
    t = load("dgx1")
    g = nx.DiGraph([(s, d) for s in range(8) for d in range(8) if t.link(s, d)])
    for s in range(8):
        for d in range(8):
            if s != d:
                assert t.hops(s, d) == nx.shortest_path_length(g, s, d)


def test_bandwidth_matrix_is_src_major_and_scaled():
    t = Topology("p", [[0, 3], [1, 0]], unit_bw=25)
    assert t.bandwidth_unit == "GB/s"
    np.testing.assert_array_equal(t.bandwidth_matrix(), [[0, 25], [75, 0]])
    assert t.bandwidth(1, 0) == 75.0


def test_fractional_units_stay_floats():
    t = Topology("half", [[0, 0.5], [0.5, 0]])
    assert t.links == [[0.0, 0.5], [0.5, 0.0]]


def test_from_graph_rejects_sparse_rank_ids():
    g = nx.DiGraph()
    g.add_nodes_from([0, 2])
    with pytest.raises(TopologyError, match="rank nodes must be 0..n-1"):
        Topology.from_graph("gap", g)


def test_fully_connected_reachability_is_total():
    assert fully_connected(6).reachability().all()


@st.composite
def matrices(draw):
    n = draw(st.integers(1, 7))
    cells = draw(st.lists(st.sampled_from([0, 0, 1, 2, 3]), min_size=n * n, max_size=n * n))
    return [[0 if d == s else cells[d * n + s] for s in range(n)] for d in range(n)]


@settings(max_examples=60, deadline=None)
@given(matrices())
def test_queries_agree_with_networkx(links):
    t = Topology("random", links)
    n = t.num_nodes()
    assert t.links == links
    assert reverse_topology(reverse_topology(t)).links == links
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from((s, d) for d in range(n) for s in range(n) if links[d][s])
    lengths = dict(nx.all_pairs_shortest_path_length(g))
    for s in range(n):
        for d in range(n):
            expected = lengths[s].get(d)
            assert t.hops(s, d) == expected
            path = t.rank_route(s, d)
            if path is not None:
                assert all(links[b][a] for a, b in zip(path, path[1:]))
    strongly = nx.is_strongly_connected(g)
    assert t.connected() == strongly
    assert t.diameter() == (nx.diameter(g) if strongly and n > 1 else (0 if n == 1 else None))
