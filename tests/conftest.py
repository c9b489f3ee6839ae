"""Shared fixtures: where the repository and ../shared live."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
PROGRAMS = REPO / "programs"

if str(PROGRAMS) not in sys.path:
    sys.path.insert(0, str(PROGRAMS))


@pytest.fixture
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip("../shared is not present")
    return SHARED
