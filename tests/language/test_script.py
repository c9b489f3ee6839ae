"""A program run as a plain script, `python prog.py > prog.xml`: all or nothing.

A refusal (or any failure) exits non-zero with nothing on stdout and the
`error:` line first on stderr; a correct program prints exactly what
`msccl-py compile` writes, with the program's own prints in order.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from msccl_py.language.runner import run_program_file
from repo_paths import REPO

DATA = REPO / "tests" / "data" / "mscclang"

HEAD = """\
from msccl_py.language import *
from msccl_py.language.collectives import AllGather, AllReduce
from msccl_py.topologies import fully_connected
"""

RING_AG = """\
def ring_allgather(n, skip=None):
    with MSCCLProgram(f"ag{n}", fully_connected(n), AllGather(n, 1, False), 1):
        for r in range(n):
            c = chunk(r, Buffer.input, 0).copy(r, Buffer.output, r)
            for step in range(n - 1):
                if (r, step) != skip:
                    c = c.copy((c.rank + 1) % n, Buffer.output, r)
        XML()
"""


def _plain(path, *args, env=None):
    """``python path args`` as a user runs it, with this checkout importable."""
    environ = dict(os.environ, PYTHONPATH=str(REPO))
    environ.pop("MSCCL_PY_DEBUG", None)
    environ.update(env or {})
    return subprocess.run([sys.executable, str(path), *map(str, args)], capture_output=True,
                          text=True, env=environ, cwd=path.parent)


def _write(tmp_path, body: str, name="prog.py"):
    path = tmp_path / name
    path.write_text(HEAD + textwrap.dedent(body))
    return path


def test_wrong_program_exits_nonzero_with_empty_stdout_and_the_error_first():
    prog = DATA / "allgather_ring_missing_step.py"
    r = _plain(prog)
    assert r.returncode != 0
    assert r.stdout == ""
    first, *rest = r.stderr.splitlines()
    assert first.startswith(f"error: {prog}:14: ring_ag_missing: wrong result for collective "
                            f"allgather: rank 1 output[2]"), first
    assert rest and all(line.startswith("  ") for line in rest), rest   # details after it
    assert any(f"{prog}:13: Check() failed" in line for line in rest)
    assert "Traceback" not in r.stderr


def test_right_program_prints_what_compile_writes(tmp_path):
    # `sys` and `defaultdict` come from the star import, as msccl-tools' does
    prog = _write(tmp_path, RING_AG + "print('before', sys.argv[1:], defaultdict(int)['x'])\n"
                                      "ring_allgather(3)\nprint('after')\n")
    r = _plain(prog, "a")
    assert r.returncode == 0, r.stderr
    (compiled,) = run_program_file(str(prog), ["a"])
    assert compiled.xml.startswith("<algo ")
    assert r.stdout == "before ['a'] 0\n" + compiled.xml + "after\n"


def test_a_later_refusal_withholds_the_earlier_programs_xml(tmp_path):
    prog = _write(tmp_path, RING_AG + "ring_allgather(3)\nring_allgather(4, skip=(2, 2))\n")
    r = _plain(prog)
    assert r.returncode != 0 and r.stdout == ""
    assert r.stderr.startswith(f"error: {prog}:")
    assert "wrong result for collective allgather" in r.stderr.splitlines()[0]


def test_compiler_error_is_one_line_without_traceback_unless_debugging(tmp_path):
    prog = _write(tmp_path, """\
        with MSCCLProgram("p", None, AllReduce(2, 1, True), 1):
            chunk(0, Buffer.input, 5)
        """)
    r = _plain(prog)
    assert r.returncode != 0 and r.stdout == ""
    assert r.stderr.splitlines() == [f"error: {prog}:5: index 5 is past the end of rank 0's "
                                     f"input buffer (1 chunks)"]


@pytest.mark.slow
def test_debug_environment_adds_the_traceback_after_the_error_line(tmp_path):
    prog = _write(tmp_path, """\
        with MSCCLProgram("p", None, AllReduce(2, 1, True), 1):
            chunk(0, Buffer.input, 5)
        """)
    r = _plain(prog, env={"MSCCL_PY_DEBUG": "1"})
    assert r.returncode != 0 and r.stdout == ""
    assert r.stderr.startswith("error: ") and "Traceback" in r.stderr


@pytest.mark.slow
def test_programs_own_error_keeps_its_traceback_after_the_error_line(tmp_path):
    prog = _write(tmp_path, """\
        print("started")
        with MSCCLProgram("p", None, AllReduce(2, 1, True), 1):
            print("inside")
            {}["missing"]
        """)
    r = _plain(prog)
    assert r.returncode != 0
    assert r.stdout == "started\n"     # what came before the first program is not held
    first = r.stderr.splitlines()[0]
    assert first == f"error: {prog}:7: KeyError: 'missing'"
    assert "Traceback (most recent call last)" in r.stderr


def test_dsl_outside_a_script_raises_instead(capsys):
    """In a REPL, notebook or test, XML() raises the refusal; nothing is held."""
    from msccl_py.errors import WrongResultError
    from msccl_py.language import Buffer, MSCCLProgram, XML, chunk
    from msccl_py.language.collectives import AllGather
    with pytest.raises(WrongResultError, match="wrong result for collective allgather"):
        with MSCCLProgram("ag", None, AllGather(2, 1, False), 1):
            chunk(0, Buffer.input, 0).copy(0, Buffer.output, 0)
            XML()
    assert sys.stdout is not None and type(sys.stdout).__name__ != "HeldOutput"
    assert capsys.readouterr().out == ""


def test_importing_the_dsl_in_a_script_changes_nothing(tmp_path):
    """The script's excepthook, stdout and exit hooks are its own until it makes a program."""
    prog = tmp_path / "importer.py"
    prog.write_text(textwrap.dedent("""\
        import atexit, sys
        hook, out = sys.excepthook, sys.stdout
        registered = []
        atexit.register = lambda f, *a, **k: registered.append(f)
        from msccl_py.language import *
        import msccl_py.language.collectives
        print(sys.excepthook is hook, sys.stdout is out, registered)
        """))
    r = _plain(prog)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "True True []\n"


def test_script_redirected_to_a_file_writes_the_xml_or_nothing(tmp_path):
    """`python prog.py > out.xml`: the whole XML on success; an empty file and exit 1 on refusal."""
    good = _write(tmp_path, RING_AG + "ring_allgather(3)\n", name="good.py")
    bad = _write(tmp_path, RING_AG + "ring_allgather(3, skip=(1, 1))\n", name="bad.py")
    environ = dict(os.environ, PYTHONPATH=str(REPO))
    environ.pop("MSCCL_PY_DEBUG", None)
    for prog, ok in ((good, True), (bad, False)):
        out = tmp_path / f"{prog.stem}.xml"
        with open(out, "w") as stdout:
            r = subprocess.run([sys.executable, str(prog)], stdout=stdout,
                               stderr=subprocess.PIPE, text=True, env=environ, cwd=tmp_path)
        if ok:
            assert r.returncode == 0, r.stderr
            (compiled,) = run_program_file(str(prog), [])
            assert out.read_text() == compiled.xml
        else:
            assert r.returncode != 0 and out.read_text() == ""
            assert r.stderr.startswith(f"error: {prog}:")
