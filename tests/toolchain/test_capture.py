"""Program files run under a capture: each XML() call's artifact, and every program's checks."""

from __future__ import annotations

import textwrap

import pytest

from msccl_py import toolchain
from msccl_py.errors import ProgramError

HEAD = """\
import sys
from msccl_py.language import *
from msccl_py.language.collectives import AllGather

def ag(name, n, skip=None):
    with MSCCLProgram(name, None, AllGather(n, 1, False), 1) as prog:
        for r in range(n):
            c = chunk(r, Buffer.input, 0).copy(r, Buffer.output, r)
            for q in range(1, n):
                if (r, q) != skip:
                    c.copy((r + q) % n, Buffer.output, r)
    return prog
"""


def _file(tmp_path, body):
    path = tmp_path / "prog.py"
    path.write_text(HEAD + textwrap.dedent(body))
    return str(path)


def test_artifacts_in_order_with_the_capture_target(tmp_path, capsys):
    path = _file(tmp_path, """
        for n in (2, 3):
            with ag(f"ag{n}", n):
                XML()
        print("done", sys.argv[1:])
    """)
    seen = []
    cap = toolchain.run_program_file(path, ["x"], "rccl", on_artifact=seen.append)
    assert [a.name for a in cap.artifacts] == ["ag2", "ag3"] and seen == cap.artifacts
    assert {a.target for a in cap.artifacts} == {"rccl"}
    assert all(a.verdict.ok and a.judged for a in cap.artifacts)
    assert capsys.readouterr().out == "done ['x']\n"      # the XML is kept, not printed


def test_a_failed_check_without_xml_is_seen(tmp_path, capsys):
    path = _file(tmp_path, """
        with ag("good", 2):
            XML()
        with ag("bad", 3, skip=(0, 1)):
            Check()
    """)
    cap = toolchain.run_program_file(path, [])
    assert len(cap.artifacts) == 1 and cap.check_failed
    bad = cap.logs[1]
    assert bad.name == "bad" and bad.passed is False
    assert any("Check() failed" in line for line in bad.report)


def test_failures_name_the_program_line(tmp_path):
    path = _file(tmp_path, """
        x = 1
        y = x / 0
    """)
    with pytest.raises(ProgramError, match=r"prog\.py:15: ZeroDivisionError"):
        toolchain.run_program_file(path, [])
    with pytest.raises(ProgramError, match="program exited with status 3"):
        toolchain.run_program_file(_file(tmp_path, "sys.exit(3)\n"), [])
    with pytest.raises(ProgramError, match="no such program file"):
        toolchain.run_program_file(str(tmp_path / "missing.py"), [])


def test_the_innermost_capture_takes_the_xml():
    from msccl_py.language import XML
    from msccl_py.language.program import MSCCLProgram

    assert toolchain.innermost() is None
    with toolchain.capture("msccl") as outer, toolchain.capture(force=True) as inner:
        assert toolchain.innermost() is inner
        namespace = {}
        exec(HEAD, namespace)
        with namespace["ag"]("ag2", 2) as prog:
            XML()
        assert isinstance(prog, MSCCLProgram)
    assert toolchain.innermost() is None
    assert outer.artifacts == [] and [a.target for a in inner.artifacts] == ["msccl-executor"]
    assert [log.program for log in outer.logs] == [prog] == [log.program for log in inner.logs]
