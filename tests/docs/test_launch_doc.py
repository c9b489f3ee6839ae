"""docs/launch.md's mpirun example runs as written and prints what the page shows."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from doc_runner import parse, run_document  # noqa: E402
from launching import have_mpirun  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "launch.md"


@pytest.mark.slow
@pytest.mark.skipif(not have_mpirun(), reason="needs mpirun and mpi4py")
def test_launch_page_runs_as_written(tmp_path, monkeypatch):
    # the page's commands import this tree's msccl_py; root may run mpirun only when told
    monkeypatch.setenv("PYTHONPATH", str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.setenv("OMPI_ALLOW_RUN_AS_ROOT", "1")
    monkeypatch.setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    for k in ("MSCCL_PY_HOST", "MSCCL_PY_DEBUG", "MSCCL_PY_ALGO_DIR"):
        monkeypatch.delenv(k, raising=False)
    run_document(DOC, tmp_path, timeout=300)


def test_launch_page_runs_one_program_twice():
    steps = parse(DOC)
    assert [s.name for s in steps if s.kind == "file"] == ["two_hosts.py"]
    assert sum(len(s.commands) for s in steps if s.kind == "run") == 2
