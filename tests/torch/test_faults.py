"""A rank killed mid-call under torchrun: the job ends, torchrun says which rank died, and no
process or shared memory is left behind."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch.distributed")

from repo_paths import REPO  # noqa: E402

HERE = Path(__file__).resolve().parent


def _shm() -> set[str]:
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


@pytest.mark.slow   # one torchrun launch of 4 ranks, about 20 s on 2 cores
def test_killed_rank_ends_the_job(tmp_path):
    before = _shm()
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           "--nproc-per-node=4", str(HERE / "kill_rank.py")], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=240)
    took = time.monotonic() - start
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    assert "finished" not in done.stdout
    # torchrun names the killed rank; the survivors' error names it too
    assert re.search(r"exitcode\s*: -9 .*\(SIGKILL\)", out), out[-4000:]
    # a BackendError: both MscclRuntimeError and torch.distributed.DistBackendError
    assert re.search(r"BackendError: msccl all_reduce on rank \d: rank \d: call #\d+ aborted "
                     r"because .*rank 2 \(pid \d+, host '[^']+'\) died", out), out[-4000:]
    assert took < 200, took
    assert _shm() - before == set()
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert str(HERE / "kill_rank.py") not in ps
