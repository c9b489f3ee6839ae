"""Shared fixtures: where the repository and ../shared live; the tests' own cache folder."""

from __future__ import annotations

import os
import sys
import tempfile
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


def pytest_configure(config) -> None:
    """Keep the library's compile cache and the native/emulation build caches out of the
    user's ~/.cache: ``$MSCCL_PY_CACHE`` points into pytest's own cache folder (kept
    between runs, so compiled programs and native builds stay warm), or, without one, a
    per-user folder under the system temp dir. Subprocesses the tests start inherit it."""
    cache = getattr(config, "cache", None)
    if cache is not None:
        path = cache.mkdir("msccl_py")
    else:
        path = Path(tempfile.gettempdir()) / f"msccl_py-tests-{os.getuid()}"
        path.mkdir(parents=True, exist_ok=True)
    os.environ["MSCCL_PY_CACHE"] = str(path)
