"""caller(): the user's FILE:LINE of each DSL call, however often a call site runs."""

from __future__ import annotations

import inspect

import pytest

from msccl_py.errors import ProgramError
from msccl_py.language import Buffer, MSCCLProgram, chunk
from msccl_py.language.collectives import AllGather

HERE = __file__


def _line() -> int:
    return inspect.currentframe().f_back.f_lineno


def test_each_call_site_keeps_its_own_line_in_a_loop():
    with MSCCLProgram("ag", None, AllGather(2, 2, False), 1) as prog:
        for i in range(2):
            first = _line() + 1
            chunk(0, Buffer.input, i).copy(0, Buffer.output, i)
            second = _line() + 1
            chunk(1, Buffer.input, i).copy(1, Buffer.output, 2 + i)
            helper = _copy_across(i)
    lines = [op.line for op in prog.ops]
    assert lines == [first, second, helper] * 2
    assert {op.file for op in prog.ops} == {HERE}


def _copy_across(i: int) -> int:
    line = _line() + 1
    chunk(0, Buffer.input, i).copy(1, Buffer.output, i)
    return line


def test_an_error_after_many_calls_names_its_own_line():
    compiled = compile("for i in range(3):\n    chunk(0, Buffer.input, 0).copy(1, Buffer.output,"
                       " 0)\nchunk(0, Buffer.input, 0).copy(7, Buffer.output, 0)\n",
                       "<user>", "exec")
    with pytest.raises(ProgramError) as info:
        with MSCCLProgram("ag", None, AllGather(2, 1, False), 1) as prog:
            exec(compiled, {"chunk": chunk, "Buffer": Buffer})
    assert (info.value.file, info.value.line) == ("<user>", 3)
    assert [(op.file, op.line) for op in prog.ops] == [("<user>", 2)] * 3
