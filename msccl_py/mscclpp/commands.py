"""``msccl-py verify/run/info`` on an MSCCL++ JSON plan (the CLI dispatches here by content).

Output and exit codes match the XML commands: ``verify`` prints the verdict
line and one line per finding (exit 0 ok, 1 incorrect/deadlock/race, 2
invalid); ``run`` prints one line per call ending ``correct`` or ``WRONG``
(exit 1 when wrong); ``info`` prints a summary.

>>> from msccl_py.cli import main
>>> main(["verify", "tests/data/mscclpp/single_node/allreduce_4.json"])   # doctest: +SKIP
ok: allreduce postcondition holds; no deadlock or race at 2048 B
0
"""

from __future__ import annotations

import time
from collections import Counter

import numpy as np

from msccl_py.errors import MscclDeadlockError, MscclRuntimeError
from msccl_py.mscclpp.ir import Plan
from msccl_py.mscclpp.read import read_plan

EXIT = {"ok": 0, "incorrect": 1, "deadlock": 1, "race": 1, "invalid": 2}


def _no_xml_options(args, names: tuple[str, ...]) -> None:
    for name in names:
        value = getattr(args, name, None)
        if value not in (None, False, 0, [], ()):
            raise MscclRuntimeError(f"--{name.replace('_', '-')} applies to MSCCL XML, not to "
                                    f"MSCCL++ plans")


def verify_command(args) -> int:
    from msccl_py.mscclpp.verify import verify_plan
    from msccl_py.plan.sizes import parse_size
    _no_xml_options(args, ("target", "buffsize"))
    plan = read_plan(args.file)
    verdict = verify_plan(plan, parse_size(args.bytes) if args.bytes else None)
    print(verdict.report())
    return EXIT[verdict.status]


def info_command(args) -> int:
    print(summary(read_plan(args.file)))
    return 0


def summary(plan: Plan) -> str:
    """A few lines: collective, ranks, protocol, sizes, and per rank threadblocks, channels, operations."""
    lines = [f"{plan.name}: MSCCL++ plan, {plan.raw_collective} on {plan.nranks} ranks, {plan.protocol}, "
             f"{'in-place' if plan.inplace else 'out-of-place'}, message sizes "
             f"{plan.min_message_size}..{plan.max_message_size} B"
             + (", double scratch buffer" if plan.double_scratch else "")
             + (", reuses resources" if plan.reuse_resources else "")]
    for g in plan.gpus:
        ops = Counter(op.name for tb in g.threadblocks for top in tb.ops for op in [top] + top.ops)
        lines.append(f"  rank {g.rank}: chunks i/o/s {g.input_chunks}/{g.output_chunks}/{g.scratch_chunks}, "
                     f"{len(g.threadblocks)} threadblocks, channels memory {len(g.memory_channels)} "
                     f"port {len(g.port_channels)} switch {len(g.switch_channels)}, ops "
                     + " ".join(f"{k}={v}" for k, v in sorted(ops.items())))
    return "\n".join(lines)


def run_command(args) -> int:
    from msccl_py.mscclpp.geometry import geometry
    from msccl_py.mscclpp.runtime import reduce_op, run_reference
    from msccl_py.mscclpp.verify import check_data, expected
    from msccl_py.plan.sizes import format_size, parse_size
    from msccl_py.runtime.reference import dtype_of
    if args.args:
        raise MscclRuntimeError(f"program arguments {' '.join(args.args)!r} given for a plan")
    _no_xml_options(args, ("placement", "slice_elems"))
    plan = read_plan(args.file)
    if args.inplace is not None and args.inplace != plan.inplace:
        raise MscclRuntimeError(f"this plan is {'in-place' if plan.inplace else 'out-of-place'} only")
    backends = {"reference": run_reference, "shm": _shm}
    if args.backend not in backends:
        raise MscclRuntimeError(f"backend {args.backend!r} does not run MSCCL++ plans; choose "
                                f"{', '.join(backends)}")
    fn = backends[args.backend]
    dtype = dtype_of(args.dtype)
    nbytes = parse_size(args.bytes)
    reduce = reduce_op(args.op)
    geo = geometry(plan, nbytes)
    rng = np.random.default_rng(args.seed)
    lo, hi = (-100, 101) if args.op in ("max", "min") else (-8, 9)
    if np.issubdtype(dtype, np.unsignedinteger):
        lo = 0
    inputs = [rng.integers(lo, hi, s["i"] // dtype.itemsize).astype(dtype) for s in geo.sizes]
    what = (f"{args.backend}: {plan.collective} {plan.name} {format_size(nbytes)} {args.dtype} "
            f"{args.op} {'in-place' if plan.inplace else 'out-of-place'}")
    times, outs = [], None
    for _ in range(max(1, args.iters)):
        t0 = time.perf_counter()
        try:
            outs = fn(plan, inputs, op=args.op)
        except MscclDeadlockError as exc:
            print(f"{what}: DEADLOCK: {exc}")
            return 1
        times.append(time.perf_counter() - t0)
    t = min(times)
    speed = f"{t * 1e3:.2f} ms/call ({nbytes / t / 1e9 if t > 0 else 0.0:.3g} GB/s per rank)"
    if expected(plan, inputs, reduce) is None and plan.collective != "sendrecv":
        print(f"{what}: ran, collective {plan.raw_collective!r} has no postcondition to check; {speed}")
        return 0
    if plan.collective == "sendrecv":
        bad = check_data(plan, inputs, outs)
    else:
        bad = [f"rank {r} {_mismatch(o, e)}" for r, (o, e) in
               enumerate(zip(outs, expected(plan, inputs, reduce))) if not np.array_equal(o, e)]
    if bad:
        print(f"{what}: WRONG: {bad[0].removeprefix('incorrect: ')}; {speed}")
        return 1
    print(f"{what}: correct, {speed}")
    return 0


def _mismatch(o: np.ndarray, e: np.ndarray) -> str:
    if o.shape != e.shape:
        return f"output has {o.size} elements, expected {e.size}"
    bad = np.nonzero(o != e)[0]
    i = int(bad[0])
    return f"output element {i} is {o[i]!r}, expected {e[i]!r} ({len(bad)} of {e.size} elements wrong)"


def _shm(plan, inputs, op="sum"):
    from msccl_py.mscclpp.shm import run_shm
    return run_shm(plan, inputs, op=op)
