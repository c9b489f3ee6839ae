"""MSCCLang programs run unchanged but for their imports, and their XML is correct."""

from __future__ import annotations

import subprocess
import sys

import pytest

from repo_paths import PROGRAMS, REPO
from msccl_py.errors import ProgramError
from msccl_py.language.runner import run_program
from msccl_py.verify import verify

DATA = REPO / "tests" / "data" / "mscclang"


def _verified(path, args, target="msccl-executor"):
    outcome = run_program(str(path), args, target)
    assert not outcome.check_failed
    (res,) = outcome.results
    post = res.program.postcondition() if res.algorithm.collective == "custom" else None
    v = verify(res.algorithm, target=target if res.algorithm.collective != "custom" else "msccl",
               postcondition=post)
    assert v.status == "ok", str(v)
    return res


@pytest.mark.parametrize("nodes", range(2, 9))
@pytest.mark.parametrize("instances", range(1, 5))
def test_seed_alltonext_backward_compiles_checks_and_verifies(nodes, instances):
    res = _verified(PROGRAMS / "alltonext_backward.py", [str(nodes), str(instances)],
                    target="msccl")
    assert res.algorithm.ngpus == 8 * nodes
    assert res.algorithm.nchunksperloop == 8 * instances


@pytest.mark.parametrize("args", [["4", "1"], ["8", "3", "--protocol", "LL"], ["3", "2"]])
def test_classic_ring_program(args):
    res = _verified(DATA / "allreduce_ring_classic.py", args)
    assert res.algorithm.protocol == (args[3] if len(args) > 2 else "Simple")


@pytest.mark.parametrize("args", [["2", "2", "1"], ["3", "2", "2"]])
def test_hierarchical_scratch_program(args):
    _verified(DATA / "allgather_hierarchical_scratch.py", args)


def test_inplace_program_relying_on_separate_buffers_is_reported(capsys):
    # XML() refuses the wrong result, naming the first wrong chunk and who wrote it
    with pytest.raises(ProgramError, match=r"wrong result for collective alltoall: rank 0 "
                       r"output\[1\]: expected Chunk.*last written at "
                       r".*alltoall_inplace_wrong.py:13") as info:
        run_program(str(DATA / "alltoall_inplace_wrong.py"), ["3"])
    # the other wrong chunks and the failed Check() follow as details, printed by no one here
    assert any("expected Chunk" in line for line in info.value.details)
    assert any("alltoall_inplace_wrong.py:14: Check() failed" in line
               for line in info.value.details)
    assert capsys.readouterr().err == ""


def test_python_program_prints_the_same_xml_as_compile(tmp_path):
    out = tmp_path / "x.xml"
    prog = str(PROGRAMS / "allreduce_ring.py")
    direct = subprocess.run([sys.executable, prog, "4", "2"], capture_output=True, text=True,
                            check=True).stdout
    subprocess.run([sys.executable, "-m", "msccl_py", "compile", "-o", str(out), prog, "4", "2"],
                   check=True, capture_output=True)
    assert direct == out.read_text()
