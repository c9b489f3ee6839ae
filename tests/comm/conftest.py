"""Fixtures of the comm tests: launches ended and checked for leftovers."""

from __future__ import annotations

import pytest

from launching import Launches


@pytest.fixture
def launches():
    """Start launches with ``launches.run``; afterwards none of their processes or /dev/shm
    entries may remain (they are removed either way)."""
    made = Launches()
    yield made
    alive, shm = made.leftovers()
    made.clean()
    assert not alive and not shm, f"left behind: processes {alive}, /dev/shm {shm}"
