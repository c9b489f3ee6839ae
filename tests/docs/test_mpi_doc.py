"""docs/mpi.md's programs run as written and print what the page shows."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from doc_runner import parse, run_document  # noqa: E402

DOC = Path(__file__).resolve().parents[2] / "docs" / "mpi.md"


def test_mpi_page_runs_as_written(tmp_path):
    run_document(DOC, tmp_path)


def test_mpi_page_shows_a_program_and_a_failure():
    steps = parse(DOC)
    assert {s.name for s in steps if s.kind == "file"} == {"seed_style.py", "one_rank_fails.py"}
    assert sum(len(s.commands) for s in steps if s.kind == "run") == 2
