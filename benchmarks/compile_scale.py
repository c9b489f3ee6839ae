"""Compile-time scaling: ring allreduce (manual threadblocks, 8 channels) and all-pairs alltoall.

Times the whole path a user runs — building the program (tracing the DSL
calls), lowering, and writing the XML — from 8 to 512 ranks and prints XML
steps per second, plus the target case (ring, 128 ranks, 4 instances).
``compile`` is that path with ``check_xml=False``; ``+verify`` adds the
verifier run that ``XML()`` does by default (symbolic execution in both
message-size regimes). Usage::

    python benchmarks/compile_scale.py [--ranks 8 16 ...] [--repeat 3] [--no-verify]

Each figure is the median of ``--repeat`` runs in this one process (more
for programs that compile in milliseconds: up to a second of runs, so a
short burst of load from elsewhere moves the median little), each case
started after a ``gc.collect()`` so it does not pay for the garbage of the
ones before it. Python's collector stays on while a run is timed.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "programs"))

from allreduce_ring import allreduce_ring  # noqa: E402
from alltoall_allpairs import alltoall_allpairs  # noqa: E402

def _once(build, target: str) -> tuple[float, int, object]:
    t0 = time.perf_counter()
    prog = build()
    prog.check_xml = False
    text = prog.generate_xml(target)
    return time.perf_counter() - t0, text.count("<step "), prog


def _time(build, target: str, repeat: int, verify: bool):
    gc.collect()  # start every case from the same heap, whatever ran before it
    first, steps, prog = _once(build, target)
    # small programs compile in milliseconds: repeat them until the median is stable
    repeat = max(repeat, min(1000, int(1.0 / max(first, 1e-6))))
    times, vtimes = [first], []
    for _ in range(repeat - 1):
        times.append(_once(build, target)[0])
    if verify:
        for _ in range(min(repeat, 3)):
            prog = _once(build, target)[2]
            prog.check_xml = True
            t1 = time.perf_counter()
            prog.generate_xml(target)  # the lowering is cached: verify, then write again
            vtimes.append(time.perf_counter() - t1)
    return statistics.median(times), (statistics.median(vtimes) if vtimes else None), steps


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, nargs="+", default=[8, 16, 32, 64, 128, 256, 512])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--no-verify", action="store_true", help="skip the +verify column")
    args = p.parse_args(argv)
    print(f"{'program':<30} {'ranks':>5} {'steps':>8} {'compile s':>9} {'steps/s':>9} "
          f"{'+verify s':>9}")
    rows = []
    for n in args.ranks:
        rows.append(("allreduce_ring 8ch (manual)", n, lambda n=n: allreduce_ring(n, min(8, n)),
                     "msccl"))
        rows.append(("alltoall_allpairs", n, lambda n=n: alltoall_allpairs(n), "msccl-executor"))
    rows.append(("allreduce_ring 8ch x4 (target)", 128, lambda: allreduce_ring(128, 8, 4),
                 "msccl"))
    for name, n, build, target in rows:
        repeat = args.repeat if n <= 128 else 1
        verify = not args.no_verify and n <= 128
        secs, vsecs, steps = _time(build, target, repeat, verify)
        vtxt = f"{vsecs:>9.3f}" if vsecs is not None else f"{'-':>9}"
        print(f"{name:<30} {n:>5} {steps:>8} {secs:>9.3f} {steps / secs:>9.0f} {vtxt}",
              flush=True)


if __name__ == "__main__":
    main()
