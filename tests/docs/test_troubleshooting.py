"""Every error docs/troubleshooting.md quotes is the one the code really produces.

Each case triggers the error for real (a CLI call, a program file, a
communicator run) and asserts that the message, without its ``FILE:LINE:``
prefix, appears verbatim in the page.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from msccl_py.cli import main

REPO = Path(__file__).resolve().parents[2]
DOC = (REPO / "docs" / "troubleshooting.md").read_text()
SHARED_XML = REPO.parent / "shared" / "corpus" / "xml"
_PREFIX = re.compile(r"^error: (\S+?:(\d+:(\d+:)?)? )?")


def body(message: str) -> str:
    """The message without ``error: FILE[:LINE[:COL]]: ``."""
    return _PREFIX.sub("", message.strip())


def assert_quoted(message: str) -> None:
    text = body(message)
    assert text and text in DOC, f"not quoted in troubleshooting.md:\n{text}"


def cli(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


PROGRAM = textwrap.dedent("""\
    import sys
    from msccl_py.language import *
    from msccl_py.language.collectives import AllGather, AllReduce
    from msccl_py.topologies import fully_connected, ring

    n, case = 4, sys.argv[1]
    topo = {"link": ring(n), "small": fully_connected(2)}.get(case, fully_connected(n))
    coll = AllGather(2, 1, False) if case in ("none", "slot") else AllReduce(n, n, True)
    with MSCCLProgram("demo", topo, coll, 1, protocol="Fast" if case == "proto" else "Simple"):
        if case == "index":
            chunk(0, Buffer.input, 4).copy(1, Buffer.input, 4)
        if case == "rank":
            chunk(0, Buffer.input, 0).copy(4, Buffer.input, 0)
        if case == "link":
            chunk(0, Buffer.input, 0).copy(2, Buffer.input, 0)
        if case == "none":
            chunk(0, Buffer.output, 1).copy(1, Buffer.output, 1)
        if case == "slot":
            chunk(0, Buffer.input, 0).copy(0, Buffer.output, 0)
            chunk(0, Buffer.output, 0, 2).copy(1, Buffer.output, 0)
        if case == "sizes":
            chunk(1, Buffer.input, 0, 2).reduce(chunk(0, Buffer.input, 0))
        if case == "chan":
            chunk(1, Buffer.input, 0).reduce(chunk(0, Buffer.input, 0), ch=40)
        if case != "noxml":
            XML()
    """)


@pytest.fixture
def prog(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "prog.py").write_text(PROGRAM)
    return "prog.py"


@pytest.mark.parametrize("case", ["index", "rank", "link", "none", "slot", "sizes", "small",
                                  "proto", "noxml", "chan"])
def test_program_errors(capsys, prog, case):
    code, out = cli(capsys, "compile", "-o", "out.xml", prog, case)
    assert code == 2
    assert out.startswith("error: prog.py")
    assert_quoted(out.splitlines()[-1])


def test_library_errors(capsys):
    for argv in (["allreduce_ringg", "--ranks", "4"],
                 ["allreduce_ring", "--ranks", "4", "--param", "chanels=2"],
                 ["allreduce_ring", "--ranks", "1"]):
        code, out = cli(capsys, "compile", *argv)
        assert code == 2
        assert_quoted(out)


def test_xml_errors(capsys):
    for name in ("missing_cnt.xml", "truncated.xml"):
        code, out = cli(capsys, "info", str(REPO / "tests" / "data" / "xml" / name))
        assert code == 2
        assert f"error: {REPO / 'tests' / 'data' / 'xml' / name}:7: " in out
        assert_quoted(out)


def test_run_errors(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ring.py").write_text(textwrap.dedent("""\
        from msccl_py.language import *
        from msccl_py.language.collectives import AllReduce
        from msccl_py.topologies import fully_connected
        with MSCCLProgram("ring", fully_connected(4), AllReduce(4, 4, True), 1):
            allreduce_ring_inplace(4)
            XML()
        """).replace("from msccl_py.language import *",
                     "from msccl_py.language import *\nfrom msccl_py.language.routines import *"))
    assert cli(capsys, "compile", "-o", "ring.xml", "ring.py")[0] == 0
    for argv in (["--bytes", "1000"], ["--outofplace"], ["--backend", "nope"],
                 ["--dtype", "complex64"], ["--op", "xor"]):
        code, out = cli(capsys, "run", "ring.xml", *argv)
        assert code == 2, out
        assert_quoted(out)
    from msccl_py.runtime import cupy as gpu
    if gpu.available() is not None:
        code, out = cli(capsys, "run", "ring.xml", "--backend", "cupy")
        assert code == 2
        assert_quoted(out)


def test_custom_collective_messages(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    src = (REPO / "docs" / "tutorial.md").read_text()
    code_block = src.split("<!-- file: neighbor_sum.py -->\n```python\n")[1].split("```")[0]
    (tmp_path / "neighbor_sum.py").write_text(code_block)
    code, out = cli(capsys, "compile", "-o", "ns.xml", "neighbor_sum.py", "4")
    assert code == 0
    assert_quoted(out.splitlines()[0])                       # the note
    code, out = cli(capsys, "verify", "--target", "msccl-executor", "ns.xml")
    assert code == 2
    assert_quoted(out.splitlines()[0])
    code, out = cli(capsys, "verify", "ns.xml")       # picks msccl, the runtime that runs it
    assert code == 0 and out.startswith("ok: ")
    code, out = cli(capsys, "run", "ns.xml")
    assert code == 2
    assert_quoted(out)
    code, out = cli(capsys, "run", "neighbor_sum.py", "4")
    assert code == 0 and ": correct," in out
    wrong = code_block.replace("(r - 1) % n, Buffer.input", "(r + 1) % n, Buffer.input")
    (tmp_path / "wrong.py").write_text(wrong)
    code, out = cli(capsys, "compile", "-o", "w.xml", "wrong.py", "4")
    assert code == 2 and not (tmp_path / "w.xml").exists()
    lines = out.splitlines()
    assert_quoted(lines[0])                                  # the verdict first
    assert all(ln in DOC for ln in lines[1:])                # the details after it


@pytest.mark.skipif(not SHARED_XML.is_dir(), reason="../shared corpus is not present")
def test_verifier_and_runtime_verdicts(capsys):
    cases = {"ns3-msccl__allreduce_hierarchical_54_1.xml": "invalid:",
             "ns3-msccl-data__all2all.xml": "invalid:",
             "ns3-msccl__allreduce_ring_2_1.xml": "incorrect:",
             "ns3-msccl-data__ar_allpair_simple_x_1.xml": "deadlock:"}
    for name, status in cases.items():
        code, out = cli(capsys, "verify", str(SHARED_XML / name))
        first = out.splitlines()[0]
        assert first.startswith(status)
        assert_quoted(first)
    code, out = cli(capsys, "run", str(SHARED_XML / "ns3-msccl-data__ar_allpair_simple_x_1.xml"),
                    "--bytes", "64MiB")
    assert code == 1
    quoted = out.strip()[:300]
    assert "DEADLOCK" in quoted and quoted in DOC


def test_topology_errors(capsys):
    code, out = cli(capsys, "topology", "show", "dgx9")
    assert code == 2
    assert_quoted(out)
    smi = REPO / "tests" / "topologies" / "data" / "rocm-smi-mi300.txt"
    if smi.is_file():
        code, out = cli(capsys, "topology", "show", "--nvidia-smi", str(smi))
        assert code == 2
        assert_quoted(out)


COMM_SCRIPT = textwrap.dedent("""\
    import sys
    import numpy as np
    import msccl_py

    def mismatch(comm):
        if comm.rank == 0:
            return comm.all_reduce(np.ones(4))
        return comm.all_gather(np.ones(4))

    def crash(comm):
        if comm.rank == 1:
            raise ValueError("bad input on rank 1")
        return comm.all_reduce(np.ones(4))

    if __name__ == "__main__":
        try:
            msccl_py.launch({"mismatch": mismatch, "crash": crash}[sys.argv[1]], 3, timeout=20)
        except msccl_py.MscclError as exc:
            print(f"{type(exc).__name__}: {exc}")
    """)


def _norm(text: str) -> str:
    """A mismatch message without rank numbers and program hashes."""
    return re.sub(r"rank \d", "rank N", re.sub(r"program#[0-9a-f]+", "program#", text))


def test_communicator_errors(tmp_path):
    script = tmp_path / "comm_err.py"
    script.write_text(COMM_SCRIPT)
    for case in ("mismatch", "crash"):
        done = subprocess.run([sys.executable, str(script), case], capture_output=True,
                              text=True, timeout=120)
        first = done.stdout.splitlines()[0]
        if case == "mismatch":
            # which rank notices first (and so the order of the two calls) varies
            head = "MscclRuntimeError: mismatched collective calls at call #1: "
            assert first.startswith(head)
            parts = sorted(_norm(first[len(head):]).split(" but "))
            assert parts == ["rank N called allgather(count=4, dtype=float64, program#)",
                             "rank N called allreduce(count=4, dtype=float64, op=sum, program#)"]
            quoted = next(line for line in DOC.splitlines() if line.startswith(head))
            assert sorted(_norm(quoted[len(head):]).split(" but ")) == parts
        else:
            assert first in DOC, first
            assert "Traceback in rank 1:" in done.stdout
