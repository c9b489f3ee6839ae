"""MSCCLang semantics as msccl-tools defines them, guarded without a msccl-tools checkout.

The two tests at the top check on our IR the properties that msccl-tools'
test_program_order and test_instruction_fusion read from its private
instruction DAG.
"""

from __future__ import annotations

import pytest

from repo_paths import REPO
from msccl_py.errors import ProgramError
from msccl_py.language import Buffer, Check, MSCCLProgram, ThreadblockPolicy, chunk
from msccl_py.language.collectives import (AllGather, AllReduce, AllToAll, Chunk, Collective,
                                           ReduceScatter)
from msccl_py.language.runner import run_program
from msccl_py.topologies import fully_connected
from msccl_py.verify import verify
from msccl_py.targets.msccl import read_xml

DATA = REPO / "tests" / "data" / "mscclang"


def _steps(alg, rank):
    return [(tb, i, st) for tb in alg.gpus[rank].threadblocks for i, st in enumerate(tb.steps)]


def _before(alg, rank, first, then) -> bool:
    """Step ``then`` on ``rank`` waits for ``first``: earlier in one threadblock, or through
    a chain of cross-threadblock dependencies."""
    (tb_a, i_a), (tb_b, i_b) = first, then
    seen, todo = set(), [(tb_b, i_b)]
    tbs = {tb.id: tb for tb in alg.gpus[rank].threadblocks}
    while todo:
        tb, i = todo.pop()
        if (tb, i) in seen:
            continue
        seen.add((tb, i))
        if tb == tb_a and i >= i_a:
            return True
        for j in range(i + 1):
            todo.extend(tbs[tb].steps[j].depends)
    return False


def test_a_send_completes_before_a_receive_overwrites_its_slot():
    with MSCCLProgram("order", fully_connected(2), AllReduce(2, 2, False), 1) as prog:
        chunk(1, Buffer.input, 0).copy(0, 'sc', 1)
        chunk(0, Buffer.input, 0).copy(1, Buffer.input, 0)
    alg = prog.lower()
    steps = _steps(alg, 1)
    send = next((tb.id, i) for tb, i, st in steps if st.op == "send" and st.src.buffer == "i"
                and st.src.offset == 0)
    recv = next((tb.id, i) for tb, i, st in steps if st.op == "recv" and st.dst.buffer == "i"
                and st.dst.offset == 0)
    assert _before(alg, 1, send, recv)


def test_instruction_fusion_chains_reduce_and_copy_hops():
    prog = MSCCLProgram("ar", fully_connected(3), AllReduce(3, 3, True), 1,
                        threadblock_policy=ThreadblockPolicy.manual)
    with prog:
        c01 = chunk(1, Buffer.input, 0, 3).reduce(chunk(0, Buffer.input, 0, 3),
                                                   sendtb=0, recvtb=0, ch=0)
        c012 = chunk(2, Buffer.input, 0, 3).reduce(c01, sendtb=0, recvtb=0, ch=0)
        c012.copy(0, Buffer.input, 0, sendtb=0, recvtb=0, ch=0).copy(
            1, Buffer.input, 0, sendtb=0, recvtb=0, ch=0)
        assert Check()
    ops = [[st.op for tb in g.threadblocks for st in tb.steps] for g in prog.lower().gpus]
    assert ops == [["send", "recv_copy_send"], ["recv_reduce_send", "recv"],
                   ["recv_reduce_copy_send"]]


def test_without_instr_fusion_every_hop_is_a_plain_send_and_receive():
    prog = MSCCLProgram("ar", fully_connected(3), AllReduce(3, 1, True), 1, instr_fusion=False)
    with prog:
        c = chunk(1, Buffer.input, 0).reduce(chunk(0, Buffer.input, 0))
        c = chunk(2, Buffer.input, 0).reduce(c)
        c.copy(0, Buffer.input, 0).copy(1, Buffer.input, 0)
        assert Check()
    ops = {st.op for g in prog.lower().gpus for tb in g.threadblocks for st in tb.steps}
    assert ops == {"send", "recv", "recv_reduce_copy"}


def _written(path, args):
    outcome = run_program(str(path), args)
    assert not outcome.check_failed
    (res,) = outcome.results
    alg = read_xml(res.xml)
    post = res.program.postcondition() if alg.collective == "custom" else None
    target = "msccl" if alg.collective == "custom" else "msccl-executor"
    assert verify(alg, target=target, postcondition=post).ok
    return alg


@pytest.mark.parametrize("args", [["2", "1", "1"], ["4", "2", "2"], ["3", "1", "3"]])
def test_inplace_allgather_destination_maps_with_the_sending_rank(args):
    alg = _written(DATA / "allgather_inplace_pairs.py", args)
    assert alg.inplace and alg.collective == "allgather"


@pytest.mark.parametrize("args", [["2", "2"], ["2", "3", "--protocol", "LL"]])
def test_alltoall_by_destination_queries_and_tuple_scratch_names(args, capsys):
    alg = _written(DATA / "alltoall_staged_by_node.py", args)
    assert all(g.scratch_chunks > 0 for g in alg.gpus)
    out = capsys.readouterr().out
    assert "Chunk(origin_rank=0, origin_index=" in out and "dst_rank=" in out


def test_custom_collective_in_place_with_separate_buffers_is_refused():
    _written(DATA / "pipeline_inplace_apart.py", ["4", "2"])
    with pytest.raises(ProgramError, match=r"inplace=True.*keeps them apart.*"
                                           r"Declare it with inplace=False") as err:
        run_program(str(DATA / "pipeline_inplace_apart.py"), ["4", "2", "--inplace"])
    assert err.value.line == 34


@pytest.mark.parametrize("name", [(0, 1), 7, frozenset({"a"}), "s2"])
def test_any_hashable_value_names_a_scratch_buffer(name):
    with MSCCLProgram("s", fully_connected(2), AllGather(2, 1, False), 1) as prog:
        for r in range(2):
            c = chunk(r, Buffer.input, 0).copy(1 - r, name, r)
            c.copy(1 - r, Buffer.output, r)
            chunk(r, Buffer.input, 0).copy(r, Buffer.output, r)
        assert chunk(0, name, 1).get_origin_rank() == 1
        assert Check()
    assert verify(prog.lower()).ok


def test_an_unhashable_buffer_name_is_an_error():
    with MSCCLProgram("s", fully_connected(2), AllGather(2, 1, False), 1):
        with pytest.raises(ProgramError, match=r"unknown buffer \[0\].*hashable"):
            chunk(0, Buffer.input, 0).copy(1, [0], 0)


@pytest.mark.parametrize("collective, buffer, index, expected", [
    # (dst_rank, dst_index) msccl-tools gives input chunks: 3 ranks, 2 chunks per rank
    (AllToAll(3, 2, False), Buffer.input, 5, (2, 3)),
    (AllToAll(3, 2, False), Buffer.input, 2, (1, 2)),
    (ReduceScatter(3, 2, False), Buffer.input, 3, (1, 1)),
    (AllGather(3, 2, False), Buffer.input, 1, (-1, 3)),
    (AllReduce(3, 2, False), Buffer.input, 1, (-1, 1)),
])
def test_chunk_destination_queries(collective, buffer, index, expected):
    with MSCCLProgram("q", None, collective, 1):
        c = chunk(1, buffer, index)
        assert (c.get_dst_rank(), c.get_dst_index()) == expected


class _Mirror(Collective):
    """Rank r's input chunk ends in rank n-1-r's output, input and output kept apart."""

    def init_buffers(self):
        n = self.num_ranks
        return [{Buffer.input: [Chunk(r, 0, n - 1 - r, 0)], Buffer.output: [None]}
                for r in range(n)]

    def check(self, prog):
        n = self.num_ranks
        return all(prog.buffers[r][Buffer.output][0] == Chunk(n - 1 - r, 0) for r in range(n))


def test_custom_collective_keeps_output_apart_even_in_place():
    # msccl-tools' Collective.get_buffer_index is the identity: declaring a custom
    # collective in place does not make its output name its input

    with MSCCLProgram("m", fully_connected(3), _Mirror(3, 1, True), 1) as prog:
        for r in range(3):
            c = chunk(r, Buffer.input, 0)
            c.copy(c.get_dst_rank(), Buffer.output, 0)
        assert Check()
        assert chunk(0, Buffer.input, 0).get_origin_rank() == 0


def test_dsl_calls_take_msccl_tools_keyword_names(capsys):
    with MSCCLProgram(name="kw", topo=fully_connected(2), collective=AllReduce(2, 1, True),
                      instances=1, protocol="Simple", instr_fusion=True) as prog:
        c = chunk(rank=1, buffer=Buffer.input, index=0, size=1)
        c = c.reduce(other_chunkref=chunk(0, Buffer.input, 0), sendtb=-1, recvtb=-1, ch=0)
        c.copy(dst=0, buffer=Buffer.input, index=0, sendtb=-1, recvtb=-1, ch=0)
        assert (c.get_origin_rank(index=0), c.get_dst_index(index=0)) == (1, 0)
        c.print_chunk_info(index=0)
        assert Check()
    assert "ReduceChunk(creation_rank=1, chunks=[Chunk(origin_rank=1" in capsys.readouterr().out
    assert verify(prog.lower()).ok


def test_threadblock_arguments_of_int_subclasses_record_one_operation():
    # a channel given as an IntEnum (or a bool) is an int to MSCCLang: the one-chunk fast
    # paths of copy() and reduce() must record it once, as the general path does
    import enum

    class Ch(enum.IntEnum):
        ZERO = 0
        ONE = 1

    with MSCCLProgram("p", fully_connected(2), AllReduce(2, 2, True), 1) as prog:
        chunk(1, Buffer.input, 0).reduce(chunk(0, Buffer.input, 0), ch=Ch.ZERO)
        chunk(1, Buffer.input, 0).copy(0, Buffer.input, 0, ch=Ch.ONE, sendtb=True)
    assert [(op.kind, op.ch) for op in prog.ops] == [("reduce", 0), ("copy", 1)]
