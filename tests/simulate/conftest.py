"""Simulator tests: library programs compile into a per-session cache, never the user's."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session", autouse=True)
def _library_cache(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("MSCCL_PY_CACHE", str(tmp_path_factory.mktemp("library-cache")))
    yield
    mp.undo()
