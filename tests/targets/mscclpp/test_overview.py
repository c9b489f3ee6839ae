"""``msccl-py info`` on an MSCCL++ plan: the size range in words, not uint64's maximum."""

from __future__ import annotations

from dataclasses import replace

from msccl_py.cli import main
from msccl_py.targets.mscclpp.overview import summary
from msccl_py.targets.mscclpp.read import read_plan
from repo_paths import REPO

PLAN = REPO / "tests" / "data" / "mscclpp" / "single_node" / "allreduce_4.json"


def test_info_says_unbounded(capsys):
    assert main(["info", str(PLAN)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.endswith("message sizes 0 B .. unbounded"), first
    assert "18446744073709551615" not in first


def test_a_bounded_plan_shows_its_bound():
    plan = replace(read_plan(str(PLAN)), min_message_size=1024, max_message_size=1 << 20)
    assert "message sizes 1024 B .. 1048576 B" in summary(plan)
