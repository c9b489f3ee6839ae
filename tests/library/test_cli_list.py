"""``msccl-py list``."""

import subprocess
import sys

import pytest

from msccl_py import library
from msccl_py.cli import main


def test_table(capsys):
    assert main(["list"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].split() == ["name", "collective", "ranks", "protocols", "sizes", "parameters"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}
    assert len(rows) >= 25 and set(rows) == set(library.names())
    assert rows["allreduce_recursive_halving_doubling"][1:3] == ["allreduce", "2^k"]
    assert "root=0[0..]" in rows["broadcast_chain"]
    assert err.strip().endswith(f"{len(rows)} programs")


def test_names_and_filter(capsys):
    assert main(["list", "--names"]) == 0
    assert capsys.readouterr().out.split() == library.names()
    assert main(["list", "--names", "--collective", "barrier"]) == 0
    assert capsys.readouterr().out.split() == ["barrier_dissemination"]
    assert main(["list", "--verbose", "--collective", "gather"]) == 0
    out = capsys.readouterr().out
    assert "binomial tree" in out and "gather_linear.py" in out


def test_unknown_collective(capsys):
    assert main(["list", "--collective", "allreduc"]) == 2
    assert "unknown collective 'allreduc'" in capsys.readouterr().err


def test_console_script():
    out = subprocess.run([sys.executable, "-m", "msccl_py", "list", "--names"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.split()) >= 25


def test_compile_by_name_uses_the_library(tmp_path, capsys):
    """`msccl-py compile NAME` (the lead's command) goes through library.compile_xml."""
    xml = pytest.importorskip("msccl_py.targets.msccl")
    target = tmp_path / "out.xml"
    code = main(["compile", "allreduce_binomial_tree", "--ranks", "8", "--param", "trees=2",
                 "--protocol", "LL", "--instances", "2", "-o", str(target)])
    assert code == 0, capsys.readouterr().err
    alg = xml.read_xml(target.read_text())
    assert (alg.ngpus, alg.protocol, alg.nchunksperloop) == (8, "LL", 4)
