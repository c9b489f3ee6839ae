"""Where the repository, its programs and ../shared live, for tests to import.

A module of its own rather than ``conftest``: several test folders have a
``conftest.py``, and which one ``import conftest`` finds depends on the
order pytest collected them in.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
PROGRAMS = REPO / "programs"
