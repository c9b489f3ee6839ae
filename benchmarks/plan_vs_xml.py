#!/usr/bin/env python3
"""One program as an MSCCL++ plan and as MSCCL XML on the shm runtime, side by side.

The program is compiled twice with the CLI, as a user would
(``msccl-py compile PROG --ranks N -o x.xml`` and ``... --target mscclpp -o
x.json``), and both files run on the shm backend, the XML through
``msccl_py.runtime.shm.run`` and the plan through
``msccl_py.runtime.mscclpp.shm.run_shm`` (what ``msccl-py run FILE --backend shm``
times). Per size: two warm-up calls each, every output checked against the
reference backend's, then ``--reps`` repetitions with the two interleaved
(plan, XML, plan, XML, ...) so load from other users hits both alike; the
table prints each median and their ratio::

    python benchmarks/plan_vs_xml.py                        # allreduce_ring, 4 ranks, 1 and 16 MiB
    python benchmarks/plan_vs_xml.py --sizes 1MiB 64MiB --reps 21
    MSCCL_PY_SHM_EXECUTOR=python python benchmarks/plan_vs_xml.py --sizes 1MiB --reps 3
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from msccl_py.cli import main as cli  # noqa: E402
from msccl_py.runtime.mscclpp import shm as plan_shm  # noqa: E402
from msccl_py.targets.mscclpp.read import read_plan  # noqa: E402
from msccl_py.runtime.mscclpp.reference import input_elems, run_reference  # noqa: E402
from msccl_py.plan.sizes import format_size, parse_size  # noqa: E402
from msccl_py.runtime import shm as xml_shm  # noqa: E402
from msccl_py.targets.msccl import read_xml  # noqa: E402


def compile_both(program: str, ranks: int, where: str):
    xml, plan = os.path.join(where, "p.xml"), os.path.join(where, "p.json")
    for argv in (["compile", program, "--ranks", str(ranks), "-o", xml],
                 ["compile", program, "--ranks", str(ranks), "--target", "mscclpp", "-o", plan]):
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            status = cli(argv)
        if status != 0:
            raise SystemExit(f"msccl-py {' '.join(argv)} failed: {err.getvalue().strip()}")
    return read_xml(xml), read_plan(plan)


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--program", default="allreduce_ring")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--sizes", nargs="+", default=["1MiB", "16MiB"])
    ap.add_argument("--reps", type=int, default=15, help="timed calls of each (default 15)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        alg, plan = compile_both(args.program, args.ranks, tmp)
    inplace = plan.inplace
    print(f"# {args.program} on {args.ranks} ranks, shm backend, float32 sum, "
          f"{'in-place' if inplace else 'out-of-place'}; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; executor "
          f"{os.environ.get('MSCCL_PY_SHM_EXECUTOR', 'auto')}")
    print(f"{'size':>8} {'XML median':>12} {'plan median':>12} {'plan/XML':>9} {'reps':>5}")
    worst = 0.0
    for size in args.sizes:
        nbytes = parse_size(size)
        rng = np.random.default_rng(0)
        inputs = [rng.integers(-8, 9, n).astype(np.float32) for n in input_elems(plan, nbytes, 4)]
        want = run_reference(plan, inputs)
        calls = {"plan": lambda: plan_shm.run_shm(plan, inputs),
                 "xml": lambda: xml_shm.run(alg, inputs, inplace=inplace)}
        for name, fn in calls.items():
            for _ in range(2):
                outs = fn()
            if not all(np.array_equal(o, w) for o, w in zip(outs, want)):
                print(f"error: {name} at {size} differs from the reference backend", file=sys.stderr)
                return 1
        times = {"plan": [], "xml": []}
        for _ in range(args.reps):
            for name, fn in calls.items():
                times[name].append(timed(fn))
        xml_t, plan_t = (statistics.median(times[k]) for k in ("xml", "plan"))
        worst = max(worst, plan_t / xml_t)
        print(f"{format_size(nbytes):>8} {xml_t * 1e3:>9.2f} ms {plan_t * 1e3:>9.2f} ms "
              f"{plan_t / xml_t:>9.2f} {args.reps:>5}")
    print(f"# largest ratio {worst:.2f} (the target is at most 2)")
    plan_shm.close()
    xml_shm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
