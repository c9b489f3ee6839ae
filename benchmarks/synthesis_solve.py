"""Synthesis solve times: ``synthesize`` end to end (bound, packings, candidates built, timed
and verified), median of ``--repeat`` runs per machine and collective.

    python benchmarks/synthesis_solve.py                        # 8 GPUs and 8 x dgx-a100
    python benchmarks/synthesis_solve.py --repeat 5 --machines mi250 dgx1 --collectives allgather

A machine ``NAME:K`` is K copies of NAME (a cluster). The first call in the
process also imports and builds the parsers (about a second); it is a run of
its own, excluded with ``--warm`` (default on). Beside the wall-clock median
it prints the median CPU seconds of the process (HiGHS threads included): on
a shared machine the wall time grows with the load, the CPU time much less.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from medians import median_seconds  # noqa: E402

from msccl_py.synthesis import bound, synthesize  # noqa: E402

DEFAULT = ["dgx1", "mi250", "dgx-a100", "mi300x", "dgx-a100:8"]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--machines", nargs="+", default=DEFAULT)
    p.add_argument("--collectives", nargs="+", default=["allgather", "allreduce"])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--no-warm", dest="warm", action="store_false")
    args = p.parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.2f} (figures under load are not comparable)")
    if args.warm:
        synthesize("dgx-h100", "allgather")
    print(f"{'machine':>12} {'collective':>15} {'ranks':>5} {'bound s':>8} {'solve s':>8} "
          f"{'CPU s':>7}  chosen")
    for spec in args.machines:
        name, _, k = spec.partition(":")
        nodes = int(k) if k else None
        for coll in args.collectives:
            repeat = 1 if nodes and nodes > 4 else args.repeat
            chosen, cpu = [], []

            def run():
                c0 = time.process_time()
                chosen.append(synthesize(name, coll, nodes=nodes))
                cpu.append(time.process_time() - c0)

            solve = median_seconds(run, repeat)
            t_bound = median_seconds(lambda: bound(name, coll, nodes=nodes), repeat)
            s = chosen[-1]
            print(f"{spec:>12} {coll:>15} {s.bound.ranks:>5} {t_bound:8.2f} {solve:8.2f} "
                  f"{statistics.median(cpu):7.2f}  "
                  f"{s.chosen.label} x{s.chosen.instances}, "
                  f"{s.algbw_GBps / s.bound.algbw_GBps:.1%} of the bound")


if __name__ == "__main__":
    main()
