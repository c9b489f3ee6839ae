"""Helpers of the tests that start real launches (mpirun, torchrun): ports, commands, leaks.

Every process of a test's launches carries a token in its environment
(``MSCCL_PY_TEST_LAUNCH``), which launchers pass on to the ranks they start,
even in sessions of their own (torchrun starts each worker in a new
session): so the test can tell its processes from everyone else's, end
them by process id if it overruns, and find any that outlive it. The
:func:`launches` fixture fails the test when a process of its launches, or
a new ``/dev/shm`` entry, remains after them, and removes both.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from repo_paths import REPO as ROOT

SHM = Path("/dev/shm")
#: the /dev/shm names a launch of ours may create (OpenMPI's shared-memory transport, torch)
_OURS = ("vader", "sm_segment", "ompi", "psm", "torch", "msccl")
TOKEN = "MSCCL_PY_TEST_LAUNCH"


def free_port() -> int:
    """A TCP port nobody listens on now (the kernel's pick)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def have_mpirun() -> bool:
    if shutil.which("mpirun") is None:
        return False
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


def mpirun(np_: int) -> list[str]:
    """``mpirun -np N`` that runs on one machine of few cores, as any user, in a container
    too (no cross-memory attach between ranks, which containers often forbid)."""
    cmd = ["mpirun", "--oversubscribe", "-np", str(np_), "--mca", "btl", "self,vader,tcp",
           "--mca", "btl_vader_single_copy_mechanism", "none"]
    if os.geteuid() == 0:
        cmd.insert(1, "--allow-run-as-root")
    return cmd


def torchrun() -> list[str]:
    exe = shutil.which("torchrun")
    return [exe] if exe else [sys.executable, "-m", "torch.distributed.run"]


def env(**extra: str) -> dict[str, str]:
    """The environment of a launch: this tree first on the path, torch quiet, ``extra``."""
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    e.setdefault("OMP_NUM_THREADS", "1")
    for k in ("MSCCL_PY_HOST", "MSCCL_PY_DEBUG", "MSCCL_PY_ALGO_DIR", "RANK", "WORLD_SIZE",
              "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        e.pop(k, None)
    e.update(extra)
    return e


class Launches:
    """The launches a test starts, ended and checked for leftovers when it finishes."""

    def __init__(self):
        self.procs: list[subprocess.Popen] = []
        self.shm_before = _shm()
        self.token = uuid.uuid4().hex

    def start(self, cmd: list[str], environ: dict[str, str], cwd: Path = ROOT
              ) -> subprocess.Popen:
        environ = dict(environ, **{TOKEN: self.token})
        proc = subprocess.Popen(cmd, env=environ, cwd=cwd, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.procs.append(proc)
        return proc

    def run(self, cmd: list[str], environ: dict[str, str], timeout: float
            ) -> tuple[int, str, str, float]:
        """Start ``cmd`` and wait: (exit status, stdout, stderr, seconds)."""
        t0 = time.perf_counter()
        proc = self.start(cmd, environ)
        out, err = wait(proc, timeout)
        return proc.returncode, out, err, time.perf_counter() - t0

    def alive(self) -> list[int]:
        """Live (not zombie) processes that carry this test's token."""
        return _carrying(f"{TOKEN}={self.token}".encode())

    def leftovers(self, grace: float = 5.0) -> tuple[list[int], list[str]]:
        """Processes of our launches still alive, and new /dev/shm entries of ours, after
        ``grace`` seconds for what is on its way out."""
        deadline = time.time() + grace
        while True:
            alive = self.alive()
            shm = sorted(n for n in _shm() - self.shm_before
                         if any(k in n for k in _OURS))
            if (not alive and not shm) or time.time() > deadline:
                return alive, shm
            time.sleep(0.2)

    def clean(self) -> None:
        killed = self.alive()
        for pid in killed:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        # SIGKILL is delivered, not done: on a loaded machine the process lives on for a
        # moment (until the kernel has torn it down), so wait until it is gone
        deadline = time.time() + 10
        while killed and self.alive() and time.time() < deadline:
            time.sleep(0.05)
        for p in self.procs:
            if p.poll() is None:
                p.wait(10)
        for name in _shm() - self.shm_before:
            if any(k in name for k in _OURS):
                try:
                    (SHM / name).unlink()
                except OSError:
                    pass


def wait(proc: subprocess.Popen, timeout: float) -> tuple[str, str]:
    """Output of ``proc``; on timeout it and its session are killed (the fixture then ends
    the rest of the launch) and the test fails."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"{proc.args} ran past {timeout} s\nstdout:\n{out[-3000:]}\n"
                             f"stderr:\n{err[-3000:]}") from None


def results(stdout: str) -> list[dict]:
    """The ``RESULT {json}`` lines of a worker's ranks, in rank order."""
    rows = [json.loads(line.split(" ", 1)[1]) for line in stdout.splitlines()
            if line.startswith("RESULT ")]
    return sorted(rows, key=lambda r: r["rank"])


def _shm() -> set[str]:
    try:
        return set(os.listdir(SHM))
    except OSError:
        return set()


def _carrying(marker: bytes) -> list[int]:
    """Process ids whose environment holds ``marker`` (zombies left out)."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            if marker not in (d / "environ").read_bytes().split(b"\0"):
                continue
            state = (d / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            out.append(int(d.name))
    return out


@pytest.fixture
def launches():
    """Start launches with ``launches.run`` / ``launches.start``; afterwards none of their
    processes or /dev/shm entries may remain (they are removed either way)."""
    made = Launches()
    yield made
    alive, shm = made.leftovers()
    made.clean()
    assert not alive and not shm, f"left behind: processes {alive}, /dev/shm {shm}"
