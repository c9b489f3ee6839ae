"""What the XML-reading commands say when given a program file or a program's name."""

from __future__ import annotations

import pytest

from msccl_py.cli import main


@pytest.mark.parametrize("command", ["verify", "info"])
def test_program_file_is_to_be_compiled_first(tmp_path, capsys, command):
    prog = tmp_path / "ring.py"
    prog.write_text("from msccl_py.language import *\n")
    assert main([command, str(prog)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {prog} is an MSCCLang program, not XML: compile it first "
                          f"(msccl-py compile -o ring.xml {prog}; then msccl-py {command} "
                          f"ring.xml)"), err
    assert err.count("\n") == 1


@pytest.mark.parametrize("command", ["verify", "info", "run"])
def test_library_name_is_to_be_compiled_first(tmp_path, capsys, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    assert main([command, "allreduce_ring"]) == 2
    assert capsys.readouterr().err.startswith(
        "error: allreduce_ring is a library program, not a file: compile it first "
        "(msccl-py compile allreduce_ring --ranks N -o allreduce_ring.xml")


def test_misspelt_program_name_gets_did_you_mean(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "allreduce_rnig"]) == 2
    assert "no library program of that name; did you mean `allreduce_ring`" in \
        capsys.readouterr().err
    assert main(["compile", "allreduce_rnig", "--ranks", "4"]) == 2
    assert "unknown program 'allreduce_rnig'; did you mean `allreduce_ring`" in \
        capsys.readouterr().err
