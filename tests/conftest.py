"""Shared fixtures: where the repository and ../shared live; the tests' own cache folder."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from repo_paths import PROGRAMS, SHARED

if str(PROGRAMS) not in sys.path:
    sys.path.insert(0, str(PROGRAMS))


@pytest.fixture
def no_matplotlib(monkeypatch) -> None:
    """Imports of matplotlib fail, as where it is not installed."""
    import builtins
    real = builtins.__import__

    def no_mpl(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError("no matplotlib")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_mpl)


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
    config._msccl_prebuild = _prebuild()


def pytest_unconfigure(config) -> None:
    proc = getattr(config, "_msccl_prebuild", None)
    if proc is not None and proc.poll() is None:   # a short run: stop the compilers too
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()


#: builds the C++ that tests load (the shm executors of XML and of plans, the GPU kernel's
#: host emulation)
PREBUILD = ("import signal, sys\n"
            "signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # clean up on the way out\n"
            "from msccl_py.runtime import shm_native\n"
            "from msccl_py.runtime.mscclpp import shm_native as plan_native\n"
            "from msccl_py.runtime.cupy import emulation\n"
            "for build in (shm_native.build, plan_native.build, emulation.build):\n"
            "    try:\n"
            "        build()\n"
            "    except Exception:\n"
            "        pass\n")


def _prebuild() -> subprocess.Popen | None:
    """On a cold cache the three C++ builds take about 40 s of one core, which the first
    tests needing them would wait for one after the other: start them at once in another
    process, beside the tests. Builds are locked and renamed into place, so a test that
    needs one waits for it or finds it. (A process, not a thread: forked ranks must not
    inherit a held build lock.)"""
    if not shutil.which(os.environ.get("CXX", "g++")):
        return None
    return subprocess.Popen([sys.executable, "-c", PREBUILD], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


SLOW_LIST = Path(__file__).with_name("slow_tests.txt")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items) -> None:
    """Mark the tests listed in slow_tests.txt ``slow`` before ``-m`` selects, so single
    parametrized cases can be long without their siblings leaving the default run."""
    slow = {line.strip() for line in SLOW_LIST.read_text().splitlines()
            if line.strip() and not line.startswith("#")}
    for item in items:
        if item.nodeid in slow:
            item.add_marker(pytest.mark.slow)
