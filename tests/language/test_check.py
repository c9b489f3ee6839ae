"""Check() reports wrong slots without raising, and models in-place aliasing."""

from __future__ import annotations

from msccl_py.language import *
from msccl_py.language.collectives import (AllGather, AllReduce, AllToAll, Broadcast, Gather,
                                           Reduce, ReduceScatter, Scatter)
from msccl_py.topologies import fully_connected


def _alltoall(n, inplace):
    with MSCCLProgram("a2a", fully_connected(n), AllToAll(n, 1, inplace), 1) as prog:
        for r in range(n):
            for q in range(n):
                chunk(r, Buffer.input, q).copy(q, Buffer.output, r)
        ok = Check()
    return prog, ok


def test_correct_program_passes():
    _, ok = _alltoall(3, False)
    assert ok is True


def test_wrong_program_reports_each_slot_on_stderr(capsys):
    with MSCCLProgram("bad", fully_connected(2), AllGather(2, 1, False), 1):
        chunk(0, Buffer.input, 0).copy(0, Buffer.output, 0)
        chunk(0, Buffer.input, 0).copy(1, Buffer.output, 0)
        ok = Check()
    err = capsys.readouterr()
    assert ok is False
    assert err.out == ""
    # rank 0 and rank 1 lack rank 1's chunk at output[1]
    assert "rank 0 output[1]: expected Chunk(1, 0), found None" in err.err
    assert "rank 1 output[1]: expected Chunk(1, 0), found None" in err.err


def test_double_counted_reduction_fails(capsys):
    with MSCCLProgram("dbl", fully_connected(2), AllReduce(2, 1, True), 1):
        c0 = chunk(0, Buffer.input, 0)
        c1 = chunk(1, Buffer.input, 0)
        c1.reduce(c0)
        c1.reduce(c0)          # rank 0's contribution twice
        c1.copy(0, Buffer.input, 0)
        assert not Check()
    assert "ReduceChunk[(0, 0), (0, 0), (1, 0)]" in capsys.readouterr().err


def test_inplace_relying_on_separate_buffers_fails_check():
    # All-pairs alltoall writes peers' outputs directly: with output ≡ input,
    # rank 0's write into rank 1 destroys rank 1's block for rank 0.
    _, ok_out = _alltoall(3, False)
    _, ok_in = _alltoall(3, True)
    assert ok_out and not ok_in


def test_inplace_allgather_input_is_output_window():
    with MSCCLProgram("ag", fully_connected(3), AllGather(3, 2, True), 1) as prog:
        ref = chunk(1, Buffer.input, 1)
        assert (ref.buffer, ref.index) == (Buffer.output, 3)
        prog.buffers[1][Buffer.output][3] = None
        assert prog.buffers[1][Buffer.input][1] is None


def test_inplace_reduce_scatter_output_is_input_window():
    with MSCCLProgram("rs", fully_connected(2), ReduceScatter(2, 1, True), 1) as prog:
        for r in range(2):
            mine = chunk(r, Buffer.input, r)
            mine.reduce(chunk(1 - r, Buffer.input, r))
        assert Check()
        assert prog.buffers[1][Buffer.output][0] is prog.buffers[1][Buffer.input][1]


def test_rooted_collectives():
    n = 3
    with MSCCLProgram("bc", fully_connected(n), Broadcast(n, 1, False, root=1), 1):
        for r in range(n):
            chunk(1, Buffer.input, 0).copy(r, Buffer.output, 0)
        assert Check()
    with MSCCLProgram("red", fully_connected(n), Reduce(n, 1, False, root=2), 1):
        acc = chunk(2, Buffer.input, 0).copy(2, Buffer.output, 0)
        for r in (0, 1):
            acc.reduce(chunk(r, Buffer.input, 0))
        assert Check()
    with MSCCLProgram("ga", fully_connected(n), Gather(n, 1, False, root=0), 1):
        for r in range(n):
            chunk(r, Buffer.input, 0).copy(0, Buffer.output, r)
        assert Check()
    with MSCCLProgram("sc", fully_connected(n), Scatter(n, 1, False, root=0), 1):
        for r in range(n):
            chunk(0, Buffer.input, r).copy(r, Buffer.output, 0)
        assert Check()


def test_chunk_reference_queries(capsys):
    with MSCCLProgram("q", fully_connected(2), AllGather(2, 2, False), 1):
        assert chunk(0, Buffer.output, 0) is None
        ref = chunk(1, Buffer.input, 0, 2)
        a, b = ref.split(2)
        assert (a.index, a.size, b.index) == (0, 1, 1)
        assert a.group(b) == ref
        assert ref.get_origin_rank(1) == 1 and ref.get_origin_index(1) == 1
        assert ref.get_dst_index(1) == 3
        dst = ref.copy(0, Buffer.output, 2)
        assert (dst.rank, dst.buffer, dst.index, dst.size) == (0, Buffer.output, 2, 2)
        s = dst.copy(1, "scratch")          # appends to a named scratch buffer
        s2 = dst.copy(1, "scratch")
        assert (s.index, s2.index) == (0, 2)
        ref.print_chunk_info(0)
    out = capsys.readouterr().out
    assert "Chunk(origin_rank=1, origin_index=0, dst_rank=-1, dst_index=2)" in out
