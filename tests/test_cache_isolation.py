"""The test suite keeps its caches out of the user's ~/.cache (tests/conftest.py)."""

import os
from pathlib import Path

from msccl_py.library import cache_dir


def test_tests_cache_in_their_own_folder():
    path = Path(os.environ["MSCCL_PY_CACHE"])
    user = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    assert not path.resolve().is_relative_to(user.resolve())
    assert cache_dir() == path
