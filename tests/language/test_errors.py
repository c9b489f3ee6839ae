"""Program errors name the user's file and line, and are msccl_py exceptions."""

from __future__ import annotations

import inspect

import pytest

from msccl_py.errors import LimitError, LinkError, MscclError, ProgramError
from msccl_py.language import *
from msccl_py.language.collectives import AllGather, AllReduce, AllToAll
from msccl_py.topologies import fully_connected, ring

HERE = __file__


def _line() -> int:
    return inspect.currentframe().f_back.f_lineno


def _raises(exc_type, fn):
    with pytest.raises(exc_type) as info:
        fn()
    exc = info.value
    assert isinstance(exc, MscclError) and not isinstance(exc, AssertionError)
    return exc


def test_copy_to_missing_rank_names_line():
    def prog():
        with MSCCLProgram("p", fully_connected(4), AllReduce(4, 4, True), 1):
            c = chunk(0, Buffer.input, 0)
            prog.line = _line(); c.copy(7, Buffer.input, 0)  # noqa: E702
    exc = _raises(ProgramError, prog)
    assert exc.file == HERE and exc.line == prog.line
    assert "rank 7" in str(exc) and "4 ranks" in str(exc)
    assert str(exc).startswith(f"{HERE}:{prog.line}:")


def test_index_past_buffer():
    def prog():
        with MSCCLProgram("p", fully_connected(2), AllReduce(2, 2, True), 1):
            prog.line = _line(); chunk(0, Buffer.input, 2)  # noqa: E702
    exc = _raises(ProgramError, prog)
    assert exc.line == prog.line and "past the end" in str(exc) and "2 chunks" in str(exc)


def test_copy_past_output_buffer():
    def prog():
        with MSCCLProgram("p", fully_connected(2), AllGather(2, 1, False), 1):
            c = chunk(0, Buffer.input, 0)
            prog.line = _line(); c.copy(1, Buffer.output, 1, )  # noqa: E702
            c.copy(1, Buffer.output, 5)
    exc = _raises(ProgramError, prog)
    assert "past the end" in str(exc) and "output" in str(exc)


def test_reduce_into_empty_slot():
    def prog():
        with MSCCLProgram("p", fully_connected(2), AllGather(2, 2, False), 1) as p:
            dst = ChunkRef(1, Buffer.output, 0, 2, p)
            src = chunk(0, Buffer.input, 0, 2)
            prog.line = _line(); dst.reduce(src)  # noqa: E702
    exc = _raises(ProgramError, prog)
    assert exc.line == prog.line and "empty slot" in str(exc) and "output[0]" in str(exc)


def test_reduce_size_mismatch():
    def prog():
        with MSCCLProgram("p", fully_connected(2), AllReduce(2, 4, True), 1):
            a = chunk(0, Buffer.input, 0, 2)
            b = chunk(1, Buffer.input, 0, 1)
            prog.line = _line(); a.reduce(b)  # noqa: E702
    exc = _raises(ProgramError, prog)
    assert exc.line == prog.line and "different sizes" in str(exc)


def test_missing_link_names_both_ranks_and_topology():
    def prog():
        with MSCCLProgram("p", ring(4), AllReduce(4, 4, True), 1):
            c = chunk(0, Buffer.input, 0)
            prog.line = _line(); c.copy(2, Buffer.input, 0)  # noqa: E702
    exc = _raises(LinkError, prog)
    msg = str(exc)
    assert exc.line == prog.line and "rank 0 to rank 2" in msg and "Ring" in msg


def test_conflicting_manual_threadblocks_name_both_operations():
    def prog():
        with MSCCLProgram("p", fully_connected(3), AllToAll(3, 1, False), 1,
                          threadblock_policy=ThreadblockPolicy.manual) as p:
            prog.first = _line(); chunk(0, Buffer.input, 1).copy(1, Buffer.output, 0, sendtb=0, recvtb=0)  # noqa: E501,E702
            prog.second = _line(); chunk(0, Buffer.input, 2).copy(2, Buffer.output, 0, sendtb=0, recvtb=0)  # noqa: E501,E702
        p.lower()
    exc = _raises(ProgramError, prog)
    msg = str(exc)
    assert exc.line == prog.second and f"{HERE}:{prog.first}" in msg
    assert "send peer" in msg and "threadblock 0" in msg


def test_manual_policy_left_out_threadblocks_take_one_peer():
    # as in msccl-tools, a left-out sendtb/recvtb is one more threadblock per rank;
    # a second send peer for it is the error, named at its line
    def prog():
        with MSCCLProgram("p", fully_connected(3), AllToAll(3, 1, False), 1,
                          threadblock_policy=ThreadblockPolicy.manual) as p:
            chunk(0, Buffer.input, 1).copy(1, Buffer.output, 0)
            prog.line = _line(); chunk(0, Buffer.input, 2).copy(2, Buffer.output, 0)  # noqa: E702
        p.lower()
    exc = _raises(ProgramError, prog)
    assert exc.line == prog.line and "without sendtb/recvtb" in str(exc)


def test_too_many_channels_for_target_names_line():
    def prog():
        with MSCCLProgram("p", fully_connected(2), AllToAll(2, 1, False), 1) as p:
            chunk(0, Buffer.input, 1).copy(1, Buffer.output, 0)
            prog.line = _line(); chunk(1, Buffer.input, 0).copy(0, Buffer.output, 1, ch=40)  # noqa: E501,E702
        p.generate_xml("msccl-executor")
    exc = _raises(LimitError, prog)
    assert exc.line == prog.line and "at most 32" in str(exc)
    assert str(exc).startswith(f"{HERE}:{prog.line}:")


def test_bad_arguments_are_program_errors():
    with pytest.raises(ProgramError, match="instances"):
        MSCCLProgram("p", fully_connected(2), AllReduce(2, 2, True), 0)
    with pytest.raises(ProgramError, match="protocol"):
        MSCCLProgram("p", fully_connected(2), AllReduce(2, 2, True), 1, protocol="LL64")
    with pytest.raises(ProgramError, match="no MSCCLProgram is active"):
        chunk(0, Buffer.input, 0)
    with MSCCLProgram("p", fully_connected(2), AllReduce(2, 2, True), 1):
        with pytest.raises(ProgramError, match="sendtb"):
            chunk(0, Buffer.input, 0).copy(1, Buffer.input, 0, sendtb="x")
        with pytest.raises(ProgramError, match="split"):
            chunk(0, Buffer.input, 0, 2).split(3)


def test_topology_smaller_than_collective():
    with pytest.raises(ProgramError, match="has 2 GPUs"):
        MSCCLProgram("p", fully_connected(2), AllReduce(4, 4, True), 1)
