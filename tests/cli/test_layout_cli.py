"""``simulate --layout HxR`` and ``tune --layout HxR``: the layout a joined launch reports."""

from __future__ import annotations

import json

import pytest

from msccl_py.cli import main


def _cli(capsys, *args) -> tuple[int, str, str]:
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_simulate_runs_the_launch_layout(capsys):
    rc, out, err = _cli(capsys, "simulate", "allreduce_hierarchical", "--topology", "dgx-h100",
                        "--layout", "2x2", "--sizes", "64KiB,16MiB", "--compare",
                        "allreduce_allpairs")
    assert rc == 0, err
    assert "on dgx-h100:2x2 (4 GPUs)" in out
    assert "allreduce_hierarchical gpus_per_node=2: allreduce, Simple, 4 ranks" in out


def test_a_full_machine_layout_is_the_same_as_nodes(capsys):
    args = ("simulate", "allreduce_ring", "--topology", "dgx-h100", "--sizes", "1MiB,64MiB",
            "--json")
    rc1, by_layout, err = _cli(capsys, *args, "--layout", "2x8")
    rc2, by_nodes, _ = _cli(capsys, *args, "--nodes", "2")
    assert rc1 == rc2 == 0, err
    assert json.loads(by_layout) == json.loads(by_nodes)


@pytest.mark.parametrize("extra, message", [
    (("--layout", "2x2", "--nodes", "2"), "--layout HxR gives the node count; drop --nodes"),
    (("--layout", "2by2"), "a layout is HOSTSxRANKS, e.g. 2x8"),
    (("--layout", "2x9"), "has 8 GPUs; cannot use 9 of them per node"),
])
def test_layout_errors(capsys, extra, message):
    rc, _, err = _cli(capsys, "simulate", "allreduce_ring", "--topology", "dgx-h100", *extra)
    assert rc == 2 and message in err


def test_tune_for_the_launch_layout(capsys, tmp_path):
    out_dir = tmp_path / "algos"
    rc, out, err = _cli(capsys, "tune", "--collective", "allreduce", "--topology", "dgx-h100",
                        "--layout", "2x2", "-o", out_dir, "--programs",
                        "allreduce_hierarchical,allreduce_allpairs", "--instances", "1",
                        "--sizes", "64KiB,16MiB")
    assert rc == 0, err
    report = (out_dir / "report" / "tune.txt").read_text()
    assert "allreduce_hierarchical gpus_per_node=2" in report
    assert "6 candidates; wrote" in out and sorted(out_dir.glob("*.xml"))   # 2 x 3 protocols
