"""Shared DSL patterns of the library programs: their examples run, and the out-of-place
helpers leave the input alone and put each result where its collective wants it."""

from __future__ import annotations

import doctest

import pytest

from msccl_py.errors import ProgramError
from msccl_py.language import Buffer, MSCCLProgram
from msccl_py.language.collectives import AllGather, AllReduce, ReduceScatter
from msccl_py.library import patterns
from msccl_py.topologies import fully_connected


def test_docstring_examples():
    result = doctest.testmod(patterns, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 20 and result.failed == 0


def _steps(prog) -> list[tuple[int, str, int]]:
    """(rank, op, count) of every step of the lowered program."""
    return sorted((gpu.rank, step.op, step.count) for gpu, tb in prog.lower().threadblocks()
                  for step in tb.steps)


@pytest.mark.parametrize("inplace", [True, False])
def test_output_buffer_copies_the_input_out_of_place_only(inplace):
    with MSCCLProgram("o", fully_connected(3), AllReduce(3, 3, inplace), 1) as prog:
        work = patterns.output_buffer(3, 3, inplace)
        patterns.ring_reduce_scatter([0, 1, 2], work, lambda j: j)
        patterns.ring_allgather([0, 1, 2], work, lambda j: j)
    assert prog.check()
    assert work == (Buffer.input if inplace else Buffer.output)


@pytest.mark.parametrize("chunks,counts", [(patterns.MAX_PIECE, [patterns.MAX_PIECE]),
                                           (patterns.MAX_PIECE + 6, [6, patterns.MAX_PIECE])])
def test_output_buffer_copies_in_pieces_of_at_most_max_piece(chunks, counts):
    n = 2
    with MSCCLProgram("o", fully_connected(n), AllReduce(n, chunks, False), 1) as prog:
        patterns.output_buffer(n, chunks, False)
    assert [count for rank, op, count in _steps(prog) if rank == 0] == counts


@pytest.mark.parametrize("inplace", [True, False])
def test_allgather_and_reduce_scatter_ends_for_either_placement(inplace):
    n = 4
    with MSCCLProgram("ag", fully_connected(n), AllGather(n, 1, inplace), 1) as prog:
        patterns.input_to_block(n, inplace)
        patterns.doubling_allgather(n, Buffer.output)
    assert prog.check()
    with MSCCLProgram("rs", fully_connected(n), ReduceScatter(n, 2, inplace), 1) as prog:
        work = patterns.work_buffer(n, 2 * n, inplace)
        patterns.ring_reduce_scatter(list(range(n)), work, lambda j: 2 * j, pieces=2)
        patterns.block_to_output(n, work, 2, inplace)
    assert prog.check()


@pytest.mark.parametrize("n", [2, 3, 5])
def test_allpairs_reduce_scatter_into_the_output_keeps_the_input(n):
    with MSCCLProgram("rs", fully_connected(n), ReduceScatter(n, 1, False), 1) as prog:
        patterns.allpairs_reduce_scatter(list(range(n)), Buffer.input, lambda j: j,
                                         into=Buffer.output)
    assert prog.check()
    # n - 1 sends and n - 1 local sums per rank plus the copy of its own block
    ops = [op for rank, op, count in _steps(prog) if rank == 0]
    assert ops.count("send") == n - 1 and ops.count("copy") == 1


def test_inplace_parameters_say_what_in_place_means():
    assert {op: (p.name, p.default) for op, p in patterns.INPLACE.items()} == {
        "allreduce": ("inplace", True), "allgather": ("inplace", False),
        "reduce_scatter": ("inplace", True)}
    assert patterns.GPUS_PER_NODE.convert("4", "p") == 4
    with pytest.raises(ProgramError, match="gpus_per_node must be at least 1"):
        patterns.GPUS_PER_NODE.convert("0", "p")
