"""Verdicts judge the declared collective: a wrong program is refused and never called ok."""

from __future__ import annotations

import re
import subprocess
import sys

from repo_paths import REPO

DATA = REPO / "tests" / "data" / "mscclang"
SAYS_FINE = re.compile(r"\b(ok|holds|correct)\b", re.IGNORECASE)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "msccl_py", *map(str, args)],
                          capture_output=True, text=True)


def _no_line_says_fine(r) -> None:
    for line in (r.stdout + r.stderr).splitlines():
        assert not SAYS_FINE.search(line), line


def test_ring_allgather_missing_a_step_is_refused_by_compile(tmp_path):
    out = tmp_path / "ag.xml"
    prog = DATA / "allgather_ring_missing_step.py"
    r = _cli("compile", "-o", out, prog)
    assert r.returncode == 2 and not out.exists() and r.stdout == ""
    first, *details = r.stderr.splitlines()
    # first the verdict: the first wrong chunk and the XML() line; then a hint to declare
    # the right collective and the failed Check()
    assert first.startswith(f"error: {prog}:14: ring_ag_missing: wrong result for collective "
                            f"allgather: rank 1 output[2]"), first
    assert "never written by the program" in first
    assert details and all(line.startswith("  ") for line in details)
    assert any("declare" in line for line in details)
    assert f"{prog}:13: Check() failed" in r.stderr
    _no_line_says_fine(r)


def test_ring_allgather_missing_a_step_fails_run():
    r = _cli("run", DATA / "allgather_ring_missing_step.py")
    assert r.returncode != 0
    _no_line_says_fine(r)


def test_force_writes_the_xml_with_a_warning_and_no_verdict(tmp_path):
    out = tmp_path / "ag.xml"
    r = _cli("compile", "--force", "-o", out, DATA / "allgather_ring_missing_step.py")
    assert r.returncode == 0 and out.exists()
    assert "warning:" in r.stderr and "wrong result for collective allgather" in r.stderr
    _no_line_says_fine(r)
    v = _cli("verify", out)   # the XML itself is judged against allgather, too
    assert v.returncode == 1 and v.stdout.startswith("incorrect: rank 1 output chunk 2")


def test_custom_collective_with_a_wrong_neighbour_names_the_line_that_wrote_it():
    prog = DATA / "custom_wrong_neighbour.py"
    r = _cli("run", prog)
    assert r.returncode == 2
    first = r.stderr.splitlines()[0]
    assert first.startswith("error: ")
    assert "wrong result for collective custom: Rank 2 chunk 0 is incorrect" in first
    assert f"last written at {prog}:30" in first
    _no_line_says_fine(r)


def test_output_dash_is_standard_output(tmp_path):
    r = subprocess.run([sys.executable, "-m", "msccl_py", "compile", "allreduce_ring",
                        "--ranks", "2", "-o", "-"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("<algo ") and not (tmp_path / "-").exists()


NO_CHECK = '''
from msccl_py.language import *
from msccl_py.language.collectives import Collective
from msccl_py.language.chunk import Chunk


class Swap(Collective):
    name = "custom"

    def init_buffers(self):
        return [{Buffer.input: [Chunk(r, 0)], Buffer.output: [None]}
                for r in range(self.num_ranks)]
{check}

with MSCCLProgram("swap", None, Swap(2, 1, False), 1):
    for r in range(2):
        chunk(r, Buffer.input, 0).copy(1 - r, Buffer.output, 0)
    XML()
'''


def test_collective_without_check_is_run_but_never_called_correct(tmp_path, capsys):
    from msccl_py.cli import main
    prog = tmp_path / "swap.py"
    prog.write_text(NO_CHECK.replace("{check}", ""))
    assert main(["run", str(prog), "-w", "0", "-n", "1"]) == 0
    cap = capsys.readouterr()
    assert "Swap defines no check()" in cap.err
    assert ": matches the program's own result (nothing checks it), median" in cap.out
    assert "correct" not in cap.out and "holds" not in cap.out


def test_check_that_raises_is_a_program_error(tmp_path, capsys):
    from msccl_py.cli import main
    prog = tmp_path / "swap.py"
    prog.write_text(NO_CHECK.replace("{check}", "    def check(self, prog):\n"
                                     "        return prog.buffers[0][Buffer.output][0].oops\n"))
    assert main(["compile", str(prog)]) == 2
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith(f"error: {prog}:17: swap: Swap.check() raised AttributeError")
