"""Judging works on the recorded data: the first wrong chunk, who wrote it, the postcondition."""

from __future__ import annotations

from msccl_py import toolchain
from msccl_py.language import Buffer, Chunk, MSCCLProgram, chunk
from msccl_py.language.collectives import AllGather, AllReduce


def test_the_first_wrong_slot_and_its_last_writer():
    with MSCCLProgram("ag", None, AllGather(2, 1, False), 1) as prog:
        chunk(0, Buffer.input, 0).copy(0, Buffer.output, 0)
        chunk(0, Buffer.input, 0).copy(1, Buffer.output, 1)    # rank 1 gets the wrong chunk
        chunk(1, Buffer.input, 0).copy(1, Buffer.output, 0)    # misplaced
        chunk(1, Buffer.input, 0).copy(0, Buffer.output, 1)
    j = toolchain.judge(prog.recording())
    assert j.ok is False and j.slot == (1, "output", 0)
    assert j.writer.startswith(f"{__file__}:14 (copy rank 1 input[0] -> rank 1 output[0]")
    msg, details = toolchain.failure_message(prog.recording(), j)
    assert msg.startswith("ag: wrong result for collective allgather: ")
    assert details[-1].startswith("if the program computes a different collective")


def test_a_reduction_copied_everywhere_is_judged_once_per_value():
    n = 16
    with MSCCLProgram("ar", None, AllReduce(n, n, True), 1) as prog:
        for step in range(n - 1):
            for k in range(n):
                chunk((k + step + 1) % n, Buffer.input, k).reduce(
                    chunk((k + step) % n, Buffer.input, k))
        for step in range(n - 1):
            for k in range(n):
                chunk((k + step - 1) % n, Buffer.input, k).copy((k + step) % n, Buffer.input, k)
    assert toolchain.judge(prog.recording()).ok is True
    prog.buffers[3][Buffer.input][5] = prog.buffers[3][Buffer.input][4]  # one slot now wrong
    j = toolchain.judge(prog.recording())
    # in place, the output is the input: the slot is named as check() read it, the writer
    # found through the aliasing
    assert j.ok is False and j.slot == (3, "output", 5) and len(j.lines) == 1
    assert "-> rank 3 input[5]" in j.writer


def test_postcondition_per_instance():
    with MSCCLProgram("ag", None, AllGather(2, 1, False), 2) as prog:
        for r in range(2):
            c = chunk(r, Buffer.input, 0).copy(r, Buffer.output, r)
            c.copy(1 - r, Buffer.output, r)
    rec = prog.recording()
    full = toolchain.postcondition(rec)
    # interleaved instances: chunk k of instance i is chunk k * 2 + i
    assert full[(0, "o", 2)] == ((1, 0),) and full[(0, "o", 3)] == ((1, 1),)
    assert toolchain.postcondition(rec, 1) == {(r, "o", o): ((o, 0),) for r in range(2)
                                               for o in range(2)}
    assert prog.postcondition() == full


class _LoudAllGather(AllGather):
    """Built-in comparison first, then a complaint of its own."""

    def check(self, prog):
        ok = self._expect(prog, {(r, q): Chunk(q, 0) for r in range(2) for q in range(2)})
        print("Check: the output is right but late")
        return False and ok


def test_a_check_complaining_after_the_built_in_comparison_names_its_last_slot():
    with MSCCLProgram("ag", None, _LoudAllGather(2, 1, False), 1) as prog:
        for r in range(2):
            chunk(r, Buffer.input, 0).copy(r, Buffer.output, r).copy(1 - r)
    j = toolchain.judge(prog.recording())
    # the values were compared off the record; the log still ends at the last slot compared
    assert j.ok is False and j.slot == (1, "output", 1)
    assert j.lines == ["Check: the output is right but late"]
