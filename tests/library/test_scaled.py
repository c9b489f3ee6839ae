"""The patterns whose programs stay linear in ranks: trees, windows and PAT-style steps."""

from __future__ import annotations

import math

import pytest

from msccl_py import ir
from msccl_py.language import Buffer, MSCCLProgram, ThreadblockPolicy
from msccl_py.language.collectives import AllGather, AllReduce, ReduceScatter
from msccl_py.library import scaled
from msccl_py.topologies import fully_connected


def _depth(parent: dict[int, int], i: int) -> int:
    return 0 if i not in parent else 1 + _depth(parent, parent[i])


@pytest.mark.parametrize("count", [1, 2, 3, 5, 8, 13, 64, 100])
def test_double_tree_spans_every_index_with_log_depth(count):
    for parent in scaled.double_tree(count):
        assert len(parent) == count - 1
        roots = set(range(count)) - set(parent)
        assert len(roots) == 1
        children = {}
        for i, p in parent.items():
            children.setdefault(p, []).append(i)
        assert max((len(c) for c in children.values()), default=0) <= 2
        assert max((_depth(parent, i) for i in parent), default=0) <= math.ceil(
            math.log2(count)) if count > 1 else True


@pytest.mark.parametrize("count", [4, 8, 16, 64])
def test_double_tree_inner_nodes_are_leaves_of_the_other(count):
    """NCCL's point of the second tree: a rank forwards (sends twice down) in one tree only."""
    first, second = scaled.double_tree(count)
    assert not set(first.values()) & set(second.values())


@pytest.mark.parametrize("nodes,local", [(2, 8), (8, 3), (128, 8), (5, 4), (17, 1)])
def test_windows_cover_every_other_node_once(nodes, local):
    win = scaled.windows(nodes, local)
    offsets = [first + j for first, length in win for j in range(length)]
    assert sorted(offsets) == list(range(1, nodes))
    lengths = [length for _, length in win]
    assert max(lengths) - min(lengths) <= 1


def _steps(prog) -> list[ir.Step]:
    return [st for _, tb in prog.lower().threadblocks() for st in tb.steps]


@pytest.mark.parametrize("n", [2, 3, 6, 11, 16])
def test_pat_patterns_are_right_and_send_everything_held_at_once(n):
    with MSCCLProgram("ag", fully_connected(n), AllGather(n, 1, True), 1,
                      threadblock_policy=ThreadblockPolicy.manual) as ag:
        scaled.pat_allgather(list(range(n)), Buffer.output, lambda j: j)
    assert ag.check()
    sends = [st for st in _steps(ag) if st.op == "send"]
    # a rank sends once per distance, twice where its run wraps: never block by block
    assert len(sends) <= 2 * n * math.ceil(math.log2(n))
    assert sum(st.count for st in sends) == n * (n - 1)
    with MSCCLProgram("rs", fully_connected(n), ReduceScatter(n, 1, True), 1,
                      threadblock_policy=ThreadblockPolicy.manual) as rs:
        scaled.pat_reduce_scatter(list(range(n)), Buffer.input, lambda j: j)
    assert rs.check()


def test_pat_splits_runs_at_the_count_bound():
    n = 200
    with MSCCLProgram("ag", fully_connected(n), AllGather(n, 1, True), 1,
                      threadblock_policy=ThreadblockPolicy.manual) as ag:
        scaled.pat_allgather(list(range(n)), Buffer.output, lambda j: j)
    assert max(st.count for st in _steps(ag)) <= 64


@pytest.mark.parametrize("nodes,local", [(3, 2), (4, 3), (6, 2)])
def test_windowed_patterns_are_right(nodes, local):
    n = nodes * local
    with MSCCLProgram("ag", fully_connected(n), AllGather(n, 1, True), 1,
                      threadblock_policy=ThreadblockPolicy.manual) as ag:
        scaled.windowed_allgather(nodes, local, Buffer.output)
    assert ag.check()
    with MSCCLProgram("rs", fully_connected(n), ReduceScatter(n, 1, True), 1,
                      threadblock_policy=ThreadblockPolicy.manual) as rs:
        scaled.windowed_reduce_scatter(nodes, local, Buffer.input)
    assert rs.check()


def test_tree_allreduce_over_a_tree_is_an_allreduce():
    n = 7
    with MSCCLProgram("t", fully_connected(n), AllReduce(n, 3, True), 1) as prog:
        scaled.tree_allreduce(list(range(n)), Buffer.input, 0, scaled.binary_tree(n), pieces=3)
    assert prog.check()
