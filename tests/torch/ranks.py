"""Start a script as N ranks of a torch launch, as torchrun would (its environment variables).

torchrun's own agent costs another interpreter with torch imported; setting
``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``
ourselves gives the ranks the same ``env://`` rendezvous at less cost. Every
rank's output comes back; a launch that outlives ``timeout`` is killed (each
rank is its own process group) and reported, so no test leaves processes.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from repo_paths import REPO

HERE = Path(__file__).resolve().parent


@dataclass
class Rank:
    rank: int
    returncode: int
    stdout: str
    stderr: str


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(script: str | Path, n: int, *args: str, env: dict | None = None,
           rank_env=None, timeout: float = 240) -> list[Rank]:
    """Run ``python script args`` as ranks 0..n-1; their exit codes and output.

    ``env`` is added to every rank's environment, ``rank_env(r)`` (a dict) to rank r's.
    """
    script = Path(script)
    if not script.is_absolute():
        script = HERE / script
    base = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
                WORLD_SIZE=str(n), LOCAL_WORLD_SIZE=str(n), OMP_NUM_THREADS="1",
                PYTHONUNBUFFERED="1",
                PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    base.update(env or {})
    procs, files = [], []
    try:
        for r in range(n):
            out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
            files.append((out, err))
            procs.append(subprocess.Popen(
                [sys.executable, str(script), *args], stdout=out, stderr=err,
                env=dict(base, RANK=str(r), LOCAL_RANK=str(r), GROUP_RANK="0",
                         **(rank_env(r) if rank_env else {})),
                start_new_session=True))
        deadline = time.monotonic() + timeout
        for p in procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                break
    finally:
        timed_out = False
        for p in procs:
            if p.poll() is None:
                timed_out = True
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    ranks = []
    for r, (p, (out, err)) in enumerate(zip(procs, files)):
        out.seek(0)
        err.seek(0)
        ranks.append(Rank(r, p.returncode, out.read(), err.read()))
        out.close()
        err.close()
    if timed_out:
        raise TimeoutError(f"{script.name} on {n} ranks ran past {timeout} s:\n" + report(ranks))
    return ranks


def report(ranks: list[Rank]) -> str:
    """Every rank's exit code and output, for an assertion message."""
    return "\n".join(f"--- rank {r.rank} exit {r.returncode}\n{r.stdout}\n{r.stderr[-4000:]}"
                     for r in ranks)


def check_all_ok(ranks: list[Rank]) -> None:
    """Every rank exited 0 and printed its summary with no failed check."""
    for r in ranks:
        assert r.returncode == 0 and "FAIL" not in r.stdout, report(ranks)
        assert f"rank {r.rank}: " in r.stdout and ", 0 failed" in r.stdout, report(ranks)
