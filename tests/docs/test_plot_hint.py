"""How to get matplotlib is said one way: by both pages that mention --plot, and the errors."""

from __future__ import annotations

import re

from msccl_py.cli import main
from msccl_py.topologies.draw import PLOT_EXTRA
from repo_paths import REPO

DOCS = REPO / "docs"


def test_both_pages_give_the_same_hint_for_plot():
    for page in ("cli.md", "performance-model.md"):
        text = (DOCS / page).read_text()
        hints = re.findall(r"--plot[^\n]*?needs matplotlib: `([^`]+)`", text)
        assert hints == [PLOT_EXTRA], (page, hints)
    png = re.findall(r"--png[^\n]*?needs matplotlib: `([^`]+)`", (DOCS / "cli.md").read_text())
    assert png == [PLOT_EXTRA]


def test_plot_without_matplotlib_says_the_same(no_matplotlib, tmp_path, capsys):
    assert main(["simulate", "allreduce_ring", "--topology", "ndv5", "--sizes", "1MiB",
                 "--plot", str(tmp_path / "busbw.png")]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"error: --plot needs matplotlib, which is not installed: {PLOT_EXTRA}"
