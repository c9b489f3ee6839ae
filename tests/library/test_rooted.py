"""Rooted-collective helpers: the root parameter, its check, and the trees gather and scatter
share (every block delivered, the same edges in opposite directions)."""

from __future__ import annotations

import collections
import doctest

import pytest

from msccl_py.language import MSCCLProgram
from msccl_py.language.collectives import Gather, Scatter
from msccl_py.library import rooted
from msccl_py.topologies import fully_connected

TREES = {"star": rooted.star, "binomial": rooted.binomial}


def test_docstring_examples():
    result = doctest.testmod(rooted, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 5 and result.failed == 0


def test_root_check_names_the_root_then_the_rings():
    assert rooted.root_check(4, {"root": 3}) is None
    assert rooted.root_check(4, {"root": 4}) == "root 4 is not a rank of 4"
    assert rooted.root_check(4, {"root": -1}) == "root -1 is not a rank of 4"
    assert rooted.root_check(4, {"root": 0, "channels": 5}) == \
        "channels (5) cannot exceed the rank count 4"
    assert rooted.root_check(4, {"root": 0, "channels": 4}) is None


def test_root_param_is_a_non_negative_int_defaulting_to_rank_0():
    param = rooted.root_param("gathering rank")
    assert (param.name, param.default, param.low, param.help) == ("root", 0, 0, "gathering rank")
    assert param.convert("5", "p") == 5


def _build(operation, tree, n, root, chunks):
    collective = Gather if operation == "gather" else Scatter
    with MSCCLProgram(f"{operation}_{tree}", fully_connected(n),
                      collective(n, chunks, False, root), 1) as prog:
        getattr(rooted, operation)(TREES[tree](n, root, chunks))
    return prog


def _cases():
    out = []
    for n in (1, 2, 3, 5, 6, 7, 8, 12, 13, 17):
        for root in sorted({0, n // 2, n - 1}):
            for chunks in (1, 3):
                out.append((n, root, chunks))
    return out


@pytest.mark.parametrize("tree", sorted(TREES))
@pytest.mark.parametrize("operation", ["gather", "scatter"])
def test_every_block_reaches_its_rank(operation, tree):
    """Any rank count, any root, blocks of several chunks: the collective's own check
    holds (a binomial subtree that wraps past the last rank is sent in two pieces)."""
    for n, root, chunks in _cases():
        assert _build(operation, tree, n, root, chunks).check(), (n, root, chunks)


def _sends(prog) -> collections.Counter:
    alg = prog.lower()
    return collections.Counter((gpu.rank, tb.send_peer, step.count)
                               for gpu, tb in alg.threadblocks() for step in tb.steps
                               if "send" in step.op)  # fused relays (recv_copy_send) too


@pytest.mark.parametrize("tree", sorted(TREES))
def test_scatter_sends_what_gather_receives(tree):
    """Gather and scatter run one tree in opposite directions: each transfer of one is a
    transfer of the other with source and destination swapped."""
    for n, root, chunks in ((6, 0, 1), (7, 3, 2), (12, 9, 1)):
        gathered = _sends(_build("gather", tree, n, root, chunks))
        scattered = _sends(_build("scatter", tree, n, root, chunks))
        assert gathered and gathered == collections.Counter(
            {(dst, src, count): k for (src, dst, count), k in scattered.items()})


def _pieces(tree, parent):
    """Edge pieces from ``parent`` by round (one child of the root per round here)."""
    return [next(e.pieces for e in edges if e.parent == parent) for edges in tree.rounds]


def test_binomial_tree_places_subtrees_at_their_ranks_and_splits_wrapping_ones():
    # 6 ranks, root 3: relative ranks 1 | 2, 3 | 4, 5 are absolute 4 | 5, 0 | 1, 2; the
    # middle subtree wraps past the last rank, so it reaches the root in two pieces
    tree = rooted.binomial(6, root=3, chunks=1)
    assert tree.own.pieces == ((0, 3, 1),) and sorted(tree.inner) == [1, 5]
    assert _pieces(tree, 3) == [((0, 4, 1),), ((0, 5, 1), (1, 0, 1)), ((0, 1, 2),)]
    # an inner rank keeps its child's blocks right after its own
    assert [e.pieces for e in tree.rounds[0] if e.parent == 5] == [((0, 1, 1),)]
    # chunks scale every offset and size
    assert _pieces(rooted.binomial(6, root=3, chunks=2), 3)[1] == ((0, 10, 2), (2, 0, 2))


def test_star_puts_the_roots_own_block_in_rank_order():
    tree = rooted.star(4, root=2, chunks=2)
    assert tree.own is None and tree.inner == ()
    assert [(e.parent, e.child, e.pieces) for e in tree.rounds[0]] == [
        (2, r, ((0, 2 * r, 2),)) for r in range(4)]
