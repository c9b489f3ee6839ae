"""The CPU collectives benchmark still runs (tiny sizes, few repetitions)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "cpu_collectives.py"


def test_benchmark_prints_a_row_per_case(tmp_path):
    out = tmp_path / "rows.json"
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--impls", "shm", "pipe", "--ranks", "2", "--sizes",
         "4KiB", "64KiB", "--reps-scale", "0.01", "--json", str(out)],
        capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(out.read_text())
    cases = {(r["impl"], r["collective"], r["bytes"]) for r in rows}
    assert cases == {(impl, coll, size) for impl in ("shm", "pipe")
                     for coll in ("allreduce", "allgather", "alltoall")
                     for size in (4096, 65536)}
    for r in rows:
        assert r["median_s"] > 0 and r["busbw_GBps"] > 0
        assert r["algorithm"]
    assert "allreduce" in proc.stdout and "busbw GB/s" in proc.stdout
