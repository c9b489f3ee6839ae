"""The engines between hosts move frames of every dtype the communicator has, bit for bit."""

from __future__ import annotations

import sys

import pytest

from launching import env, free_port, have_mpirun, mpirun, results, wait
from repo_paths import REPO

WORKER = str(REPO / "tests" / "transport" / "engine_worker.py")
DTYPES = ("float32", "float64", "float16", "bfloat16", "int8", "uint8", "int32", "int64")


def _check(rows: list[dict], engine: str) -> None:
    assert [r["rank"] for r in rows] == [0, 1]
    assert all(r["engine"] == engine for r in rows)
    assert rows[1]["bad"] == []
    assert rows[0]["frames_sent"] == len(DTYPES)
    # 37 + k elements of each dtype, as bytes
    itemsize = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int8": 1, "uint8": 1,
                "int32": 4, "int64": 8}
    assert rows[0]["bytes_sent"] == sum((37 + k) * itemsize[d] for k, d in enumerate(DTYPES))


@pytest.mark.skipif(not have_mpirun(), reason="needs mpirun and mpi4py")
def test_mpi_engine_moves_every_dtype(launches):
    rc, out, err, _ = launches.run(mpirun(2) + [sys.executable, WORKER, "mpi"], env(), 120)
    assert rc == 0, err[-3000:]
    _check(results(out), "mpi")


@pytest.mark.slow     # importing torch takes ~10 s on 2 busy cores
def test_gloo_engine_moves_every_dtype(launches):
    pytest.importorskip("torch")
    port = free_port()
    procs = [launches.start([sys.executable, WORKER, "gloo", str(r), str(port)], env())
             for r in (0, 1)]
    outs = [wait(p, 120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs[0][1][-2000:] + outs[1][1][-2000:]
    _check(results(outs[0][0] + outs[1][0]), "gloo")
