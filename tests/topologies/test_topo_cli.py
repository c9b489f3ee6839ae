"""`msccl-py topology list|show`."""

from pathlib import Path

import pytest

from msccl_py.cli import main

DATA = Path(__file__).parent / "data"


def test_list(capsys):
    assert main(["topology", "list", "--names"]) == 0
    names = capsys.readouterr().out.split()
    assert {"dgx1", "dgx-h100", "mi300x", "amd8"} <= set(names)
    assert main(["topology", "list"]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA DGX-1" in out and "dgx1.topo" in out


def test_show_cluster(capsys):
    assert main(["topology", "show", "dgx-h100", "--nodes", "2"]) == 0
    out = capsys.readouterr().out
    assert "16 = 2 machines x 8" in out
    assert "450 GB/s per direction" in out and "bisection bandwidth           400 GB/s" in out


def test_show_matrix(capsys):
    assert main(["topology", "show", "dgx1", "--matrix"]) == 0
    out = capsys.readouterr().out.splitlines()
    row0 = next(line for line in out if line.startswith("0 "))
    assert row0.split() == ["0", ".", "50", "25", "25", "50", ".", ".", "."]


def test_show_nvidia_smi(capsys):
    assert main(["topology", "show", "--nvidia-smi", str(DATA / "dgx-a100-nics.txt")]) == 0
    out = capsys.readouterr().out
    assert "300 GB/s per direction" in out and "1 / 10" in out


def test_show_png(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "d.png"
    assert main(["topology", "show", "dgx1", "--png", str(out)]) == 0
    assert out.stat().st_size > 20_000 and f"wrote {out}" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["topology", "show", "nope"], "error: unknown topology 'nope'"),
    (["topology", "show", "mi250", "--nodes", "2"], "declares no NICs"),
    (["topology", "show", "--nvidia-smi", str(DATA / "rocm-smi-mi300.txt")], "rocm-smi output"),
    (["topology", "show", "dgx1", "--nodes", "0"], "nodes must be a positive integer"),
])
def test_errors_exit_2_with_one_line(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_malformed_file_error(tmp_path, capsys):
    bad = tmp_path / "bad.topo"
    bad.write_text("machine m {\n  gpus 2\n  link 0 <=> 1 x\n}\n")
    assert main(["topology", "show", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {bad}:3:10: unexpected character '<'; expected <-> or ->\n"
