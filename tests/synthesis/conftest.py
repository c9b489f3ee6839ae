"""Synthesis tests: library programs compile into a per-session cache, never the user's;
tests that need HiGHS skip without it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))   # machines.py


@pytest.fixture(scope="session", autouse=True)
def _library_cache(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("MSCCL_PY_CACHE", str(tmp_path_factory.mktemp("library-cache")))
    yield
    mp.undo()


@pytest.fixture
def highs():
    pytest.importorskip("highspy")
