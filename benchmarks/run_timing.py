"""``msccl-py run`` timing: the default (warm-ups, then the median of timed calls) against
``--iters 10``, and the cold first call, on the shm backend.

Usage::

    python benchmarks/run_timing.py [--ranks 4] [--bytes 64MiB] [--repeat 3]

Each ``run`` is a fresh process (as a user runs it), so every run pays the
cold start; the reported median should not. Prints each run's median and
the ratio of the default's to ``--iters 10``'s median over ``--repeat``
pairs.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

MEDIAN = re.compile(r"median ([0-9.]+) ms")


def run(xml: Path, size: str, *extra: str) -> float:
    done = subprocess.run([sys.executable, "-m", "msccl_py", "run", str(xml), "--backend",
                           "shm", "--bytes", size, *extra], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"run failed ({done.returncode}): {done.stdout}{done.stderr}")
    print("   ", done.stdout.strip())
    return float(MEDIAN.search(done.stdout).group(1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--bytes", default="64MiB")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="msccl_py-bench-") as tmp:
        xml = Path(tmp) / "ring.xml"
        subprocess.run([sys.executable, "-m", "msccl_py", "compile", "allreduce_ring",
                        "--ranks", str(args.ranks), "-o", str(xml)], check=True,
                       capture_output=True)
        cold, default, ten = [], [], []
        for _ in range(args.repeat):
            cold.append(run(xml, args.bytes, "-w", "0", "-n", "1"))
            default.append(run(xml, args.bytes))
            ten.append(run(xml, args.bytes, "--iters", "10"))
    c, d, t = (statistics.median(x) for x in (cold, default, ten))
    print(f"allreduce_ring, {args.ranks} ranks, {args.bytes}, shm, medians of {args.repeat}: "
          f"cold first call {c:.1f} ms, default {d:.1f} ms, --iters 10 {t:.1f} ms; "
          f"default / --iters 10 = {d / t:.2f}")


if __name__ == "__main__":
    main()
