"""``msccl-py compile`` and ``msccl-py info`` from the command line."""

from __future__ import annotations

import subprocess
import sys

from repo_paths import PROGRAMS, REPO

DATA = REPO / "tests" / "data" / "mscclang"


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "msccl_py", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd)


def test_compile_to_file_and_stdout(tmp_path):
    out = tmp_path / "ring.xml"
    r = _cli("compile", "-o", out, PROGRAMS / "allreduce_ring.py", "4")
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    assert out.read_text().startswith('<algo name="allreduce_ring_1ch"')
    assert "wrote" in r.stderr and "allreduce, 4 ranks" in r.stderr
    r2 = _cli("compile", PROGRAMS / "allreduce_ring.py", "4")
    assert r2.returncode == 0 and r2.stdout == out.read_text()


def test_target_dialect_spelling(tmp_path):
    from msccl_py.targets.msccl import read_xml  # noqa: F401
    prog = tmp_path / "rs.py"
    prog.write_text(
        "from msccl_py.language import *\n"
        "from msccl_py.language.collectives import ReduceScatter\n"
        "from msccl_py.topologies import fully_connected\n"
        "with MSCCLProgram('rs', fully_connected(2), ReduceScatter(2, 1, False), 1):\n"
        "    for r in range(2):\n"
        "        c = chunk(r, Buffer.input, r).copy(r, 'acc')\n"
        "        c.reduce(chunk(1 - r, Buffer.input, r))\n"
        "        c.copy(r, Buffer.output, 0)\n"
        "    Check()\n"
        "    XML()\n")
    old = _cli("compile", "--target", "msccl", prog)
    new = _cli("compile", prog)
    assert 'coll="reduce_scatter"' in old.stdout
    assert 'coll="reducescatter"' in new.stdout


def test_failed_check_writes_nothing_unless_forced(tmp_path):
    out = tmp_path / "bad.xml"
    r = _cli("compile", "-o", out, DATA / "alltoall_inplace_wrong.py", "3")
    assert r.returncode == 2
    assert not out.exists()
    assert "Check() failed" in r.stderr and "expected Chunk" in r.stderr
    assert r.stderr.startswith("error: ")   # the verdict first, the details after it
    r = _cli("compile", "--force", "-o", out, DATA / "alltoall_inplace_wrong.py", "3")
    assert r.returncode == 0 and out.exists() and "warning" in r.stderr


def test_program_error_is_one_line_with_file_and_line(tmp_path):
    prog = tmp_path / "oops.py"
    prog.write_text(
        "from msccl_py.language import *\n"
        "from msccl_py.language.collectives import AllReduce\n"
        "from msccl_py.topologies import ring\n"
        "with MSCCLProgram('p', ring(4), AllReduce(4, 4, True), 1):\n"
        "    chunk(0, Buffer.input, 0).copy(2, Buffer.input, 0)\n")
    r = _cli("compile", prog)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {prog}:5:")
    assert "no link from rank 0 to rank 2" in lines[0]
    assert "Traceback" not in r.stderr
    r = _cli("compile", "--debug", prog)
    assert r.returncode == 2 and "Traceback" in r.stderr


def test_python_exception_in_program_points_at_its_line(tmp_path):
    prog = tmp_path / "typo.py"
    prog.write_text("from msccl_py.language import *\nx = 1\nundefined_name\n")
    r = _cli("compile", prog)
    assert r.returncode == 2
    assert r.stderr.startswith(f"error: {prog}:3: NameError")


def test_program_argument_error_exits_2(tmp_path):
    r = _cli("compile", PROGRAMS / "alltonext_backward.py")
    assert r.returncode == 2 and "error:" in r.stderr


def test_info_summary(tmp_path):
    out = tmp_path / "a2a.xml"
    assert _cli("compile", "-o", out, PROGRAMS / "alltoall_allpairs.py", "3").returncode == 0
    r = _cli("info", out)
    assert r.returncode == 0
    assert r.stdout.startswith("alltoall_allpairs: alltoall, 3 ranks, protocol Simple")
    assert "rank  tbs  steps" in r.stdout


def test_info_on_bad_file_is_one_line(tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text("<algo name='x'>\n<gpu\n")
    r = _cli("info", bad)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("error:")
