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


@pytest.fixture(scope="session", autouse=True)
def _machine_files(tmp_path_factory):
    """The held-out machines' .topo files go to pytest's temp folder, not a /tmp folder of
    their own that would outlive the run."""
    import synth_machines
    synth_machines._DIR[:] = [str(tmp_path_factory.mktemp("machines"))]
    yield
    synth_machines._DIR.clear()


@pytest.fixture
def highs():
    pytest.importorskip("highspy")
