"""Compile-time scaling: ring allreduce (manual threadblocks, 8 channels) and all-pairs alltoall.

Times the whole path a user runs — building the program (tracing the DSL
calls), lowering, and writing the XML — from 8 to 512 ranks and prints XML
steps per second. Usage::

    python benchmarks/compile_scale.py [--ranks 8 16 ...] [--instances 4] [--repeat 3]

Each figure is the median of ``--repeat`` runs in this one process.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "programs"))

from allreduce_ring import allreduce_ring  # noqa: E402
from alltoall_allpairs import alltoall_allpairs  # noqa: E402

def _time(build, target: str, repeat: int):
    times, steps = [], 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        prog = build()
        text = prog.generate_xml(target)
        times.append(time.perf_counter() - t0)
        steps = text.count("<step ")
    return statistics.median(times), steps

def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, nargs="+", default=[8, 16, 32, 64, 128, 256, 512])
    p.add_argument("--instances", type=int, default=4, help="instances for the ring")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args(argv)
    print(f"{'program':<34} {'ranks':>5} {'steps':>8} {'seconds':>8} {'steps/s':>10}")
    for n in args.ranks:
        cases = [
            (f"allreduce_ring 8ch x{args.instances} (manual)",
             lambda: allreduce_ring(n, min(8, n), args.instances), "msccl"),
            ("alltoall_allpairs", lambda: alltoall_allpairs(n), "msccl-executor"),
        ]
        for name, build, target in cases:
            repeat = args.repeat if n <= 128 else 1
            secs, steps = _time(build, target, repeat)
            print(f"{name:<34} {n:>5} {steps:>8} {secs:>8.3f} {steps / secs:>10.0f}", flush=True)

if __name__ == "__main__":
    main()
