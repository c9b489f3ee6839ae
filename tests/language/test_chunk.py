"""Symbolic chunk values: lazy reductions flatten in operand order, expected ones by keys."""

from __future__ import annotations

from msccl_py.language.chunk import Chunk, ReduceChunk, reduction_of


def test_reductions_flatten_left_to_right_whatever_their_shape():
    c = [Chunk(r, 0) for r in range(6)]
    right = c[0]
    for x in c[1:]:
        right = x.reduce(1, right)   # a ring: each rank adds its chunk to what arrives
    left = c[0]
    for x in c[1:]:
        left = left.reduce(1, x)
    tree = c[0].reduce(0, c[1]).reduce(0, c[2].reduce(0, c[3])).reduce(0, ReduceChunk(0, c[4:]))
    assert [k.origin_rank for k in right.chunks] == [5, 4, 3, 2, 1, 0]
    assert [k.origin_rank for k in left.chunks] == [0, 1, 2, 3, 4, 5]
    assert [k.origin_rank for k in tree.chunks] == [0, 1, 2, 3, 4, 5]
    assert right == left == tree and hash(right) == hash(tree)
    assert right != left.reduce(1, c[0])   # a contribution counted twice
    assert tree.chunks is tree.chunks      # flattened once


def test_a_long_chain_flattens_without_recursion():
    value = Chunk(0, 0)
    for r in range(1, 20000):
        value = Chunk(r, 0).reduce(r, value)
    other = Chunk(0, 0)
    for r in range(1, 20000):
        other = other.reduce(r, Chunk(r, 0))
    assert len(value.chunks) == 20000 and value == other


class Tagged(Chunk):
    """A chunk type of a program's own, with its own key()."""

    def key(self):
        return (self.origin_index, self.origin_rank)


def test_sorted_keys_use_a_chunk_types_own_key():
    value = Tagged(1, 0).reduce(0, Tagged(0, 1))
    assert value.sorted_keys() == ((0, 1), (1, 0))
    assert Chunk(1, 0).reduce(0, Chunk(0, 1)).sorted_keys() == ((0, 1), (1, 0))


def test_expected_reductions_made_from_keys():
    want = reduction_of(-1, [(2, 0), (0, 0), (1, 0)])
    got = Chunk(1, 0).reduce(3, Chunk(0, 0)).reduce(3, Chunk(2, 0))
    assert want == got and got == want and hash(want) == hash(got)
    assert repr(want) == "ReduceChunk[(0, 0), (1, 0), (2, 0)]"
    assert [(k.origin_rank, k.origin_index) for k in want.chunks] == [(0, 0), (1, 0), (2, 0)]
    assert reduction_of(0, [(0, 0)]) == Chunk(0, 0) and want != Chunk(0, 0)
    assert ReduceChunk(0).chunks == ()
