"""Critical path and step counts on hand-built IR whose answers are known."""

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from msccl_py import ir
from msccl_py.analysis import build_graph, critical_path, step_counts
from msccl_py.errors import VerificationError

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "xml"


def ring_allreduce_ir(n: int) -> ir.Algorithm:
    """Fused one-threadblock ring allreduce: s, rrs*(n-2), rrcs, rcs*(n-2), r."""
    gpus = []
    for r in range(n):
        ops = ["send"] + ["recv_reduce_send"] * (n - 2) + ["recv_reduce_copy_send"] \
            + ["recv_copy_send"] * (n - 2) + ["recv"]
        steps = []
        for k, op in enumerate(ops):
            chunk = (r - k) % n if k < n else (r + 1 - (k - n + 1)) % n
            steps.append(ir.Step(op, src=ir.Loc("i", chunk), dst=ir.Loc("i", chunk)))
        gpus.append(ir.Gpu(r, n, n, threadblocks=[
            ir.Threadblock(0, send_peer=(r + 1) % n, recv_peer=(r - 1) % n, steps=steps)]))
    return ir.Algorithm("ring", "allreduce", "Simple", True, n, n, 1, gpus=gpus)


def two_rank(send_steps, recv_steps, recv_tb_extra=()):
    return ir.Algorithm("t", "custom", "Simple", False, 2, 1, 1, gpus=[
        ir.Gpu(0, 1, 1, threadblocks=[ir.Threadblock(0, send_peer=1, recv_peer=1,
                                                      steps=send_steps)]),
        ir.Gpu(1, 1, 1, threadblocks=[ir.Threadblock(0, send_peer=0, recv_peer=0,
                                                      steps=recv_steps), *recv_tb_extra])])


@pytest.mark.parametrize("n", [2, 3, 4, 8, 16])
def test_ring_allreduce_is_2n_minus_2(n):
    cp = critical_path(ring_allreduce_ir(n))
    assert cp.length == 2 * (n - 1)
    assert len(cp.hops) == 2 * (n - 1)
    # the chain walks the ring: each hop goes to the next rank
    assert all(b.rank == (a.rank + 1) % n for a, b in cp.hops)


def test_chunks_weight_counts_data():
    alg = two_rank([ir.Step("send", ir.Loc("i", 0), count=3)],
                   [ir.Step("recv", dst=ir.Loc("o", 0), count=3)])
    assert critical_path(alg).length == 1
    assert critical_path(alg, weight="chunks").length == 3


def test_local_dependencies_cost_nothing_but_order_chains():
    # rank 1 receives, then (on another tb, via depends) sends back: two hops
    back = ir.Threadblock(1, send_peer=0, channel=1,
                          steps=[ir.Step("send", ir.Loc("o", 0), depends=[(0, 0)])])
    alg = ir.Algorithm("t", "custom", "Simple", False, 2, 1, 2, gpus=[
        ir.Gpu(0, 1, 1, threadblocks=[
            ir.Threadblock(0, send_peer=1, steps=[ir.Step("send", ir.Loc("i", 0))]),
            ir.Threadblock(1, recv_peer=1, channel=1,
                           steps=[ir.Step("recv", dst=ir.Loc("o", 0))])]),
        ir.Gpu(1, 1, 1, threadblocks=[
            ir.Threadblock(0, recv_peer=0, steps=[ir.Step("recv", dst=ir.Loc("o", 0),
                                                          has_dependents=True)]), back])])
    cp = critical_path(alg)
    assert cp.length == 2
    assert [(s.rank, s.tb) for s in cp.path] == [(0, 0), (1, 0), (1, 1), (0, 1)]


def test_independent_sends_do_not_add_up():
    # n-1 sends from rank 0 on separate channels: one round, not n-1
    n = 5
    gpus = [ir.Gpu(0, 1, 1, threadblocks=[
        ir.Threadblock(p - 1, send_peer=p, channel=0, steps=[ir.Step("send", ir.Loc("i", 0))])
        for p in range(1, n)])]
    gpus += [ir.Gpu(p, 1, 1, threadblocks=[
        ir.Threadblock(0, recv_peer=0, steps=[ir.Step("recv", dst=ir.Loc("o", 0))])])
        for p in range(1, n)]
    assert critical_path(ir.Algorithm("b", "broadcast", "Simple", False, n, 1, 1,
                                      gpus=gpus)).length == 1


def test_cycle_is_reported():
    # each rank receives before it sends: neither can start
    alg = two_rank([ir.Step("recv", dst=ir.Loc("o", 0)), ir.Step("send", ir.Loc("i", 0))],
                   [ir.Step("recv", dst=ir.Loc("o", 0)), ir.Step("send", ir.Loc("i", 0))])
    with pytest.raises(VerificationError, match="cycle: rank . tb 0 step ."):
        critical_path(alg)


def test_unmatched_connection_is_reported():
    alg = two_rank([ir.Step("send", ir.Loc("i", 0)), ir.Step("send", ir.Loc("i", 0))],
                   [ir.Step("recv", dst=ir.Loc("o", 0))])
    with pytest.raises(VerificationError, match="0->1 channel 0: 2 sends but 1 receives"):
        build_graph(alg)


def test_count_mismatch_and_missing_dependency_are_reported():
    alg = two_rank([ir.Step("send", ir.Loc("i", 0), count=2)], [ir.Step("recv", count=1)])
    with pytest.raises(VerificationError, match="sends 2 chunks but rank 1 tb 0 step 0 receives 1"):
        build_graph(alg)
    alg = two_rank([ir.Step("send", ir.Loc("i", 0), depends=[(7, 0)])], [ir.Step("recv")])
    with pytest.raises(VerificationError, match="rank 0 tb 0 step 0 depends on tb 7 step 0"):
        build_graph(alg)


def test_shared_connection_is_reported():
    extra = ir.Threadblock(1, recv_peer=0, steps=[ir.Step("recv")])
    alg = two_rank([ir.Step("send", ir.Loc("i", 0)), ir.Step("send", ir.Loc("i", 0))],
                   [ir.Step("recv")], [extra])
    with pytest.raises(VerificationError, match="threadblocks 0 and 1 both recv"):
        build_graph(alg)


def test_bad_weight():
    with pytest.raises(VerificationError, match="unknown critical-path weight"):
        critical_path(ring_allreduce_ir(2), weight="time")


def test_step_counts_ring():
    counts = step_counts(ring_allreduce_ir(4))
    assert counts.steps == 4 * 7
    assert counts.ops == {"recv": 4, "recv_copy_send": 8, "recv_reduce_copy_send": 4,
                          "recv_reduce_send": 8, "send": 4}
    assert counts.sends_per_rank == {r: 6 for r in range(4)}
    assert counts.max_steps_per_threadblock == 7
    assert counts.max_threadblocks_per_gpu == 1
    assert counts.channels_used == 1


@pytest.mark.parametrize("name,expected", [
    ("ns3-msccl__allreduce_ring_8_1.xml", 14),          # ring allreduce: 2(n-1)
    ("msccl-scheduler__ndv4__r48ll.xml", 14),
    ("rccl-unittest__all-reduce-ring-simple.xml", 30),
    ("ns3-msccl__allreduce_hierarchical_64_1.xml", 126),
    ("ns3-msccl-data__ag_ring_simple_1_1.xml", 7),      # ring allgather: n-1
    ("ns3-msccl-data__ar_allpair_simple_x_1.xml", 2),   # all-pairs allreduce: 2
    ("ns3-msccl-data__ag_allpair_simple_x_1.xml", 1),   # all-pairs allgather: 1
    # this file names itself a ring allreduce but only swaps chunks (no reduction): 1 step
    ("ns3-msccl__allreduce_ring_2_1.xml", 1),
])
def test_corpus_critical_paths(name, expected):
    """Real MSCCL XML from other tools has the step counts its algorithm implies."""
    path = CORPUS / name
    if not path.exists():
        pytest.skip("shared corpus not available")
    xml = pytest.importorskip("msccl_py.targets.msccl")
    assert critical_path(xml.read_xml(path)).length == expected


def random_program(transfers, local_deps):
    """IR from (src, dst, channel) transfers and (rank, back) dependencies on earlier steps."""
    n = 1 + max(max(s, d) for s, d, _ in transfers)
    tbs = [dict() for _ in range(n)]
    created = [[] for _ in range(n)]  # per rank: (tb key, step index) in creation order

    def add(rank, key, step):
        tb = tbs[rank].setdefault(key, [])
        tb.append(step)
        created[rank].append((key, len(tb) - 1))
        return step

    deps = iter(local_deps)
    for src, dst, ch in transfers:
        for rank, key, op in ((src, ("s", dst, ch), "send"), (dst, ("r", src, ch), "recv")):
            step = ir.Step(op, src=ir.Loc("i", 0), dst=ir.Loc("o", 0))
            back = next(deps, 0)
            if back and created[rank]:
                key_dep, idx = created[rank][-min(back, len(created[rank]))]
                step.depends.append((key_dep, idx))
            add(rank, key, step)
    gpus = []
    for r in range(n):
        ids = {key: i for i, key in enumerate(tbs[r])}
        threadblocks = []
        for key, steps in tbs[r].items():
            for step in steps:
                step.depends = [(ids[k], i) for k, i in step.depends]
            kind, peer, ch = key
            threadblocks.append(ir.Threadblock(ids[key], send_peer=peer if kind == "s" else -1,
                                               recv_peer=peer if kind == "r" else -1, channel=ch,
                                               steps=steps))
        gpus.append(ir.Gpu(r, 1, 1, threadblocks=threadblocks))
    return ir.Algorithm("random", "custom", "Simple", False, n, 1, 2, gpus=gpus)


def networkx_length(alg):
    import networkx as nx
    graph = build_graph(alg)
    g = nx.DiGraph()
    g.add_nodes_from(range(len(graph)))
    for a, edges in enumerate(graph.succ):
        for b, comm in edges:
            w = 1 if comm else 0
            if not g.has_edge(a, b) or g[a][b]["weight"] < w:
                g.add_edge(a, b, weight=w)
    return nx.dag_longest_path_length(g, weight="weight", default_weight=0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4), st.integers(0, 1))
                .filter(lambda t: t[0] != t[1]), min_size=1, max_size=30),
       st.lists(st.integers(0, 4), max_size=60))
def test_matches_networkx_longest_path(transfers, local_deps):
    """The linear-time critical path equals networkx's longest path on random programs."""
    alg = random_program(transfers, local_deps)
    assert critical_path(alg).length == networkx_length(alg)
