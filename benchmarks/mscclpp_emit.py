"""Time lowering MSCCLang programs to MSCCL++ plans: median seconds and steps per second.

    python benchmarks/mscclpp_emit.py                    # ring / allpairs / hierarchical, 8..64 ranks
    python benchmarks/mscclpp_emit.py --repeat 5 --verify

Prints one row per program: MSCCL steps, plan operations, median time of
``lower`` (and of ``emit``, which also writes, reads back and verifies the
plan, with --verify), and steps per second, which should stay roughly flat
as programs grow (lowering is linear in program size).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from medians import median_seconds  # noqa: E402

from msccl_py.library import compile as compile_program  # noqa: E402
from msccl_py.targets.mscclpp.emit import lower  # noqa: E402
from msccl_py.toolchain.mscclpp_plan import emit  # noqa: E402

CASES = [("allreduce_ring", r, {"channels": max(1, r // 8)}) for r in (8, 16, 32, 64)] + \
        [("allgather_allpairs", r, {}) for r in (8, 16, 32)] + \
        [("allreduce_hierarchical", r, {}) for r in (8, 16, 32)]



def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--verify", action="store_true", help="also time emit (write, read back, verify)")
    args = ap.parse_args()
    print(f"{'program':34} {'steps':>7} {'ops':>7} {'lower s':>8} {'steps/s':>9} {'emit s':>8}")
    for name, ranks, params in CASES:
        alg = compile_program(name, ranks, protocol="Simple", use_cache=False, **params)
        steps = alg.num_steps()
        plan = lower(alg)
        ops = sum(len(tb.ops) for g in plan.gpus for tb in g.threadblocks)
        t = median_seconds(lambda: lower(alg), args.repeat)
        e = f"{median_seconds(lambda: emit(alg), args.repeat):8.3f}" if args.verify else f"{'-':>8}"
        print(f"{name + f' {ranks}':34} {steps:7d} {ops:7d} {t:8.4f} {steps / t:9.0f} {e}")


if __name__ == "__main__":
    main()
