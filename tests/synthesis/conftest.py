"""Synthesis tests: library programs compile into a per-session cache, never the user's;
tests that need HiGHS skip without it."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session", autouse=True)
def _library_cache(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("MSCCL_PY_CACHE", str(tmp_path_factory.mktemp("library-cache")))
    yield
    mp.undo()


@pytest.fixture
def highs():
    pytest.importorskip("highspy")
