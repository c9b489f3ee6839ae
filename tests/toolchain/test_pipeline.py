"""The one pipeline: a recording (or IR) and a target in, an artifact out, nothing printed."""

from __future__ import annotations

import pytest

from msccl_py import toolchain
from msccl_py.errors import LimitError, MscclError, ProgramError, WrongResultError, error_report
from msccl_py.language import Buffer, Check, Chunk, MSCCLProgram, ThreadblockPolicy, chunk
from msccl_py.language.collectives import AllGather, Collective
from msccl_py.topologies import fully_connected
from msccl_py.targets.msccl import read_xml


class Bounce(Collective):
    """Rank 0's k chunks travel to rank 1 and back into rank 0's output."""

    def init_buffers(self):
        bufs = []
        for r in range(2):
            bufs.append({Buffer.input: [Chunk(r, i) for i in range(self.chunk_factor)],
                         Buffer.output: [None] * self.chunk_factor})
        return bufs

    def check(self, prog):
        out = prog.buffers[0][Buffer.output]
        return list(out) == [Chunk(0, i) for i in range(len(out))]


def bounce(k: int) -> MSCCLProgram:
    """One threadblock of rank 0 sends and receives: large messages fill both FIFOs."""
    prog = MSCCLProgram("bounce", fully_connected(2), Bounce(2, k, False), 1,
                        threadblock_policy=ThreadblockPolicy.manual)
    with prog:
        there = chunk(0, Buffer.input, 0, k).copy(1, "tmp", 0, sendtb=0, recvtb=0)
        there.copy(0, Buffer.output, 0, sendtb=0, recvtb=0)
    return prog


def ring_allgather(n: int, skip: int | None = None) -> MSCCLProgram:
    with MSCCLProgram(f"ag{n}", fully_connected(n), AllGather(n, 1, False), 1) as prog:
        for r in range(n):
            c = chunk(r, Buffer.input, 0).copy(r, Buffer.output, r)
            for step in range(n - 1):
                if (r, step) != (skip, 0):
                    c = c.copy((c.rank + 1) % n, Buffer.output, r)
    return prog


def test_returns_data_prints_nothing_and_leaves_its_input_alone(capsys):
    prog = bounce(10)
    alg = prog.lower()
    rec = prog.recording()
    art = toolchain.compile(rec, "msccl")
    assert capsys.readouterr() == ("", "")
    assert art.verdict.status == "deadlock" and art.judged is True
    assert 0 < art.algorithm.max_bytes < 1 << 40
    assert art.notes == [f"note: bounce: {art.verdict.reason}; maxBytes="
                         f"{art.algorithm.max_bytes} keeps the runtimes from selecting it for "
                         f"larger messages"]
    assert alg.max_bytes == 0 and art.algorithm is not alg   # the program's IR is untouched
    assert rec.lowered[0] is alg
    assert read_xml(art.text).max_bytes == art.algorithm.max_bytes


def test_the_default_target_follows_the_collective_with_a_note():
    class Swap(Collective):
        def init_buffers(self):
            return [{Buffer.input: [Chunk(r, 0)], Buffer.output: [None]} for r in range(2)]

        def check(self, prog):
            return all(prog.buffers[r][Buffer.output][0] == Chunk(1 - r, 0) for r in range(2))

    with MSCCLProgram("swap", None, Swap(2, 1, False), 1) as prog:
        for r in range(2):
            chunk(r, Buffer.input, 0).copy(1 - r, Buffer.output, 0)
    art = toolchain.compile(prog.recording())
    assert art.target == "msccl" and art.verdict.ok
    assert art.notes == ["note: swap: collective 'custom' runs only on target msccl; "
                         "writing that dialect"]
    assert toolchain.compile(prog.recording(), "msccl").notes == []


def test_a_wrong_result_is_refused_at_the_call_or_written_with_force():
    rec = ring_allgather(3, skip=1).recording(call=("prog.py", 7))
    with pytest.raises(WrongResultError, match=r"^prog\.py:7: ag3: wrong result .*no XML") as e:
        toolchain.compile(rec)
    assert "compile --force writes the XML anyway" in e.value.details
    art = toolchain.compile(rec, policy=toolchain.Policy(force=True))
    assert art.judged is False and art.verdict is None and art.text.startswith("<algo")
    assert art.notes[0].startswith("warning: ag3: wrong result for collective allgather")


def test_an_error_after_a_note_carries_it_before_the_error_line():
    class Unjudged(Collective):
        """In place, but input and output kept apart, and no check() to judge by."""

        def init_buffers(self):
            return [{Buffer.input: [Chunk(r, 0)], Buffer.output: [None]} for r in range(2)]

    with MSCCLProgram("apart", None, Unjudged(2, 1, True), 1) as prog:
        chunk(0, Buffer.input, 0).copy(1, Buffer.output, 0)
        chunk(1, Buffer.input, 0).copy(0, Buffer.output, 0)
    with pytest.raises(ProgramError, match="keeps them apart") as e:
        toolchain.compile(prog.recording(), "msccl")
    assert len(e.value.notes) == 1 and "defines no check()" in e.value.notes[0]
    lines = error_report(e.value).splitlines()
    assert lines[0] == e.value.notes[0] and lines[1].startswith("error: ")


def test_limits_name_the_program_line_of_the_channel():
    with MSCCLProgram("wide", None, AllGather(2, 1, False), 1) as prog:
        for r in range(2):
            c = chunk(r, Buffer.input, 0).copy(r, Buffer.output, r)
            c.copy(1 - r, Buffer.output, r, ch=40)
    with pytest.raises(LimitError, match=r"test_pipeline\.py:\d+: the program uses 41 channels"):
        toolchain.compile(prog.recording(), "msccl")


def test_a_passed_check_is_not_judged_again(monkeypatch):
    prog = ring_allgather(3)
    with prog:
        assert Check()
    rec = prog.recording()
    assert rec.checked
    monkeypatch.setattr(type(prog.collective), "check", lambda self, p: 1 / 0)
    assert toolchain.compile(rec).judged is True


def test_ir_only_and_an_ir_source():
    prog = ring_allgather(4)
    bare = toolchain.compile(prog.recording(), policy=toolchain.Policy(text=False))
    assert bare.text is None and bare.verdict.ok
    again = toolchain.compile(bare.algorithm, "rccl")
    assert again.judged is None and again.verdict.ok and 'coll="allgather"' in again.text
    unverified = toolchain.compile(bare.algorithm, policy=toolchain.Policy(verify=False))
    assert unverified.verdict is None and unverified.target == "msccl-executor"


def test_mscclpp_target_judges_then_emits_a_verified_plan():
    art = toolchain.compile(ring_allgather(4).recording(), toolchain.MSCCLPP)
    assert art.target == "mscclpp" and art.judged is True
    assert art.plan.collective == "allgather" and '"collective"' in art.text
    with pytest.raises(WrongResultError):
        toolchain.compile(ring_allgather(4, skip=0).recording(), toolchain.MSCCLPP)


def test_unknown_sources_are_refused():
    with pytest.raises(MscclError, match="cannot compile a str"):
        toolchain.compile("<algo/>")


def test_check_after_xml_reuses_the_compile_judgement(monkeypatch, capsys):
    calls = []
    real = AllGather.check
    monkeypatch.setattr(AllGather, "check", lambda self, p: calls.append(1) or real(self, p))
    prog = ring_allgather(3)
    with prog:
        prog.compile()   # what XML() does
        assert len(calls) == 1
        assert Check() and len(calls) == 1     # the same trace: judged once
        chunk(0, Buffer.input, 0).copy(1, Buffer.output, 0)
        assert Check() and len(calls) == 2     # a new operation: judged again
    assert prog.check_results == [True, True]


def test_a_replicated_program_is_held_to_the_limits_of_all_its_instances():
    from msccl_py.targets.msccl import check_limits
    k = 22   # threadblocks per rank of one instance; rccl runs at most 64
    with MSCCLProgram("ag2x", fully_connected(2), AllGather(2, k, False), 3,
                      threadblock_policy=ThreadblockPolicy.manual) as prog:
        for r in range(2):
            for i in range(k):
                c = chunk(r, Buffer.input, i).copy(r, Buffer.output, r * k + i, sendtb=i, ch=i)
                c.copy(1 - r, Buffer.output, r * k + i, sendtb=i, recvtb=i, ch=i)
    alg, base = prog.lower(), prog._base
    assert base is not None and len(alg.gpus[0].threadblocks) == 3 * k
    check_limits(base, "rccl")
    with pytest.raises(LimitError) as direct:
        check_limits(alg, "rccl")
    with pytest.raises(LimitError) as e:
        toolchain.compile(prog.recording(), "rccl")
    assert str(direct.value) in str(e.value) and "66 threadblocks" in str(e.value)
