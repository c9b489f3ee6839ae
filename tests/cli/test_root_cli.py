"""Rooted collectives keep their root through compile -> verify -> run without extra flags."""

from __future__ import annotations

import pytest

from msccl_py.cli import main
from msccl_py.errors import XmlError
from msccl_py.targets.msccl import read_xml


def test_broadcast_root_survives_compile_verify_run(tmp_path, capsys):
    bc = str(tmp_path / "bc.xml")
    assert main(["compile", "broadcast_binomial_tree", "--ranks", "8", "--param", "root=3",
                 "-o", bc]) == 0
    assert read_xml(bc).root == 3
    assert main(["verify", bc]) == 0
    assert capsys.readouterr().out.startswith("ok: broadcast postcondition holds")
    assert main(["run", bc, "--backend", "reference", "--bytes", "1MiB"]) == 0
    assert "broadcast_binomial_tree root 3 1 MiB float32 out-of-place: correct" in \
        capsys.readouterr().out
    # an explicit other root is honoured, and the program is then wrong for it
    assert main(["verify", bc, "--root", "0"]) == 1
    assert main(["run", bc, "--root", "0", "-w", "0", "-n", "1"]) == 1


@pytest.mark.parametrize("cmd", ["verify", "run"])
def test_root_outside_the_ranks_is_refused(tmp_path, capsys, cmd):
    bc = str(tmp_path / "bc.xml")
    assert main(["compile", "broadcast_binomial_tree", "--ranks", "4", "-o", bc]) == 0
    capsys.readouterr()
    assert main([cmd, bc, "--root", "9"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: root 9 is not a rank of 'broadcast_binomial_tree', which has "
                          "4 ranks (0..3)"), err


@pytest.mark.parametrize("name", ["reduce_binomial_tree", "gather_linear", "scatter_binomial"])
def test_other_rooted_collectives_keep_their_root(tmp_path, capsys, name):
    path = str(tmp_path / "x.xml")
    assert main(["compile", name, "--ranks", "4", "--param", "root=2", "-o", path]) == 0
    assert main(["verify", path]) == 0
    assert main(["run", path, "-w", "0", "-n", "1"]) == 0
    assert " root 2 " in capsys.readouterr().out


def test_xml_root_attribute_is_checked(tmp_path):
    path = tmp_path / "bc.xml"
    assert main(["compile", "broadcast_binomial_tree", "--ranks", "4", "-o", str(path)]) == 0
    text = path.read_text()
    assert ' root="0">' in text.splitlines()[0]
    path.write_text(text.replace(' root="0"', ' root="4"', 1))
    with pytest.raises(XmlError, match=r"bc.xml:1: <algo> root=4 is not a rank of the 4-rank"):
        read_xml(str(path))
    path.write_text(text.replace(' root="0"', '', 1))
    assert read_xml(str(path)).root is None   # other tools' XML: verify and run assume 0


def test_program_file_rooted_collective_runs_with_its_root(tmp_path, capsys):
    prog = tmp_path / "bc.py"
    prog.write_text(
        "from msccl_py.language import *\n"
        "from msccl_py.language.collectives import Broadcast\n"
        "with MSCCLProgram('bc', None, Broadcast(3, 1, False, root=2), 1):\n"
        "    c = chunk(2, Buffer.input, 0)\n"
        "    for r in range(3):\n"
        "        c.copy(r, Buffer.output, 0)\n"
        "    XML()\n")
    assert main(["run", str(prog), "-w", "0", "-n", "1"]) == 0
    assert "broadcast bc root 2 " in capsys.readouterr().out
