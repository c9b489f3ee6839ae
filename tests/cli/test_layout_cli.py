"""``simulate --layout HxR`` and ``tune --layout HxR``: the layout a joined launch reports."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from repo_paths import REPO


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "msccl_py", *map(str, args)], cwd=REPO,
                          capture_output=True, text=True, env=dict(os.environ))


def test_simulate_runs_the_launch_layout():
    r = _cli("simulate", "allreduce_hierarchical", "--topology", "dgx-h100", "--layout", "2x2",
             "--sizes", "64KiB,16MiB", "--compare", "allreduce_allpairs")
    assert r.returncode == 0, r.stderr
    assert "on dgx-h100:2x2 (4 GPUs)" in r.stdout
    assert "allreduce_hierarchical gpus_per_node=2: allreduce, Simple, 4 ranks" in r.stdout


def test_a_full_machine_layout_is_the_same_as_nodes():
    args = ("simulate", "allreduce_ring", "--topology", "dgx-h100", "--sizes", "1MiB,64MiB",
            "--json")
    by_layout = _cli(*args, "--layout", "2x8")
    by_nodes = _cli(*args, "--nodes", "2")
    assert by_layout.returncode == 0 and by_nodes.returncode == 0, by_layout.stderr
    assert json.loads(by_layout.stdout) == json.loads(by_nodes.stdout)


def test_layout_errors():
    both = _cli("simulate", "allreduce_ring", "--topology", "dgx-h100", "--layout", "2x2",
                "--nodes", "2")
    assert both.returncode == 2 and "--layout HxR gives the node count; drop --nodes" in both.stderr
    bad = _cli("simulate", "allreduce_ring", "--topology", "dgx-h100", "--layout", "2by2")
    assert bad.returncode == 2 and "a layout is HOSTSxRANKS, e.g. 2x8" in bad.stderr
    big = _cli("simulate", "allreduce_ring", "--topology", "dgx-h100", "--layout", "2x9")
    assert big.returncode == 2 and "has 8 GPUs; cannot use 9 of them per node" in big.stderr


def test_tune_for_the_launch_layout(tmp_path):
    out = tmp_path / "algos"
    r = _cli("tune", "--collective", "allreduce", "--topology", "dgx-h100", "--layout", "2x2",
             "-o", out, "--programs", "allreduce_hierarchical,allreduce_allpairs",
             "--instances", "1", "--sizes", "64KiB,16MiB")
    assert r.returncode == 0, r.stderr
    report = (out / "report" / "tune.txt").read_text()
    assert "allreduce_hierarchical gpus_per_node=2" in report
    assert "6 candidates; wrote" in r.stdout and sorted(out.glob("*.xml"))   # 2 x 3 protocols
