"""Time the MSCCL++ plan verifier on MSCCL++'s own plans: median seconds and operations per second.

    python benchmarks/mscclpp_verify.py                  # every plan in tests/data/mscclpp, 3 repeats
    python benchmarks/mscclpp_verify.py --repeat 5 single_node/allreduce_8

Prints one row per plan: executed operations (pipelines unrolled, at the
verifier's sizes), median verify time, and operations per second, which
should stay roughly flat as plans grow (the passes are linear in plan size).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from msccl_py.errors import PlanError
from msccl_py.plan.mscclpp.memory import expand
from msccl_py.plan.mscclpp.geometry import geometry
from msccl_py.targets.mscclpp.read import read_plan
from msccl_py.verify.mscclpp.plan_check import regimes, verify_plan

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "mscclpp"


def executed_ops(plan) -> int:
    total = 0
    for size in regimes(plan):
        chunk = geometry(plan, size).chunk
        total += sum(len(expand(plan, chunk, tb.ops)) for g in plan.gpus for tb in g.threadblocks)
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("plans", nargs="*", help="plan names under tests/data/mscclpp (default: all)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    paths = [DATA / f"{p}.json" for p in args.plans] or sorted(DATA.glob("*/*.json"))
    print(f"{'plan':45} {'ops':>7} {'median s':>9} {'ops/s':>9}  verdict")
    for path in paths:
        try:
            plan = read_plan(str(path))
        except PlanError as exc:
            print(f"{path.stem:45} {'-':>7} {'-':>9} {'-':>9}  {exc}")
            continue
        times, verdict = [], None
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            verdict = verify_plan(plan)
            times.append(time.perf_counter() - t0)
        med = statistics.median(times)
        n = executed_ops(plan)
        print(f"{path.parent.name + '/' + path.stem:45} {n:7d} {med:9.3f} {n / med:9.0f}  {verdict.status}")


if __name__ == "__main__":
    main()
