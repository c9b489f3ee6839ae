"""``msccl-py run FILE.xml|PROGRAM.py [ARGS]``: run an algorithm on random data and check it.

Inputs are random integer-valued numbers (small enough that float sums and
products are exact), the result is compared with NumPy's
(:mod:`msccl_py.runtime.expected`) after every call, and the timing is
reported as nccl-tests does: ``-w`` untimed warm-up calls, then ``-n`` timed
calls, whose median time, algbw (size/time) and busbw (algbw times
nccl-tests' factor for the collective) are printed. Exit status 1 on a wrong
result. Put program options after ``--``.

Backends are looked up by name in :data:`BACKENDS` (``module:function``,
imported on use, called as ``fn(alg, inputs, op=..., inplace=...)``); adding
one is one line.

>>> from msccl_py.cli import main
>>> main(["run", "ring.xml", "--bytes", "1MiB"])   # doctest: +SKIP
reference: allreduce ring 1 MiB float32 sum in-place: correct, median 2.100 ms over 5 calls after 2 warm-ups, algbw 0.50 GB/s, busbw 0.87 GB/s
0
"""

from __future__ import annotations

import importlib
import time

import numpy as np

from msccl_py import ir
from msccl_py.cli import add_command
from msccl_py.errors import MscclDeadlockError, MscclError, MscclRuntimeError

#: backend name -> "module:function"
BACKENDS = {
    "reference": "msccl_py.runtime.reference:run",
    "shm": "msccl_py.runtime.shm:run",
    "cupy": "msccl_py.runtime.cupy:run",
    "emulated": "msccl_py.runtime.cupy.emulation:emulated_run",
}


def get_backend(name: str):
    """The run function of backend ``name``; a one-line error when unknown or unavailable."""
    spec = BACKENDS.get(name)
    if spec is None:
        raise MscclRuntimeError(f"unknown backend {name!r}; choose one of "
                                f"{', '.join(BACKENDS)}")
    module, func = spec.split(":")
    try:
        return getattr(importlib.import_module(module), func)
    except ImportError as exc:
        raise MscclRuntimeError(f"backend {name!r} is unavailable here: {exc}") from None
    except AttributeError:
        raise MscclRuntimeError(f"backend {name!r} is unavailable here: {module} has no "
                                f"{func}()") from None


def register(subparsers) -> None:
    sub = add_command(subparsers, "run",
                      help="run an XML file or MSCCLang program on random data and check it")
    sub.add_argument("file", metavar="FILE", help="an MSCCL XML file or an MSCCLang program (.py)")
    sub.add_argument("args", nargs="*", metavar="ARGS",
                     help="the program's arguments (after -- when they start with -)")
    sub.add_argument("--backend", default="reference",
                     help=f"runtime to use: {', '.join(BACKENDS)} (default reference)")
    sub.add_argument("--bytes", metavar="SIZE", default="1MiB",
                     help="per-rank size as NCCL counts it (output for allgather, input for "
                          "reduce_scatter), e.g. 64MiB (default 1MiB)")
    sub.add_argument("--dtype", default="float32", help="element type (default float32)")
    sub.add_argument("--op", default="sum", help="reduction: sum, prod, max, min, avg")
    sub.add_argument("-w", "--warmup", type=int, default=2,
                     help="untimed warm-up calls before the timed ones (default 2)")
    sub.add_argument("-n", "--iters", type=int, default=5,
                     help="timed calls; the median is reported (default 5)")
    place = sub.add_mutually_exclusive_group()
    place.add_argument("--inplace", dest="inplace", action="store_const", const=True,
                       default=None, help="run the in-place call")
    place.add_argument("--outofplace", dest="inplace", action="store_const", const=False,
                       help="run the out-of-place call")
    sub.add_argument("--root", type=int, default=None,
                     help="root of a broadcast/reduce/gather/scatter (default: the XML's root "
                          "attribute, else 0)")
    sub.add_argument("--seed", type=int, default=0, help="random seed of the inputs")
    sub.add_argument("--placement", choices=("one-gpu", "devices", "host"), default=None,
                     help="cupy backend: all ranks on one GPU (default), rank r on device r, "
                          "or the host-driven fallback")
    sub.add_argument("--slice-elems", type=int, default=None,
                     help="reference backend: pipeline slice in elements per chunk")
    sub.set_defaults(func=run)


def random_inputs(alg, nbytes: int, dtype: np.dtype, op: str, seed: int = 0) -> list[np.ndarray]:
    """Integer-valued random inputs, one per rank, for a call of ``nbytes``."""
    from msccl_py.plan.tables import plan_for
    from msccl_py.plan.sizes import chunk_elems
    S = chunk_elems(alg.nchunksperloop, nbytes, dtype.itemsize)
    cc = plan_for(alg).call_chunks
    rng = np.random.default_rng(seed)
    unsigned = np.issubdtype(dtype, np.unsignedinteger)
    if op == "prod":
        lo, hi = (1, 3) if unsigned else (-1, 3)
    elif op in ("sum", "avg"):
        lo, hi = (0, 4) if unsigned else (-8, 9)
    else:
        lo, hi = (0, 200) if unsigned else (-100, 101)
    # drawn as int16 (the values are small): a quarter of the int64 default's cost
    return [rng.integers(lo, hi, int(cc[r, 0]) * S, dtype=np.int16).astype(dtype)
            for r in range(alg.ngpus)]


def _num(x) -> str:
    """A NumPy scalar as plain Python prints it (5.0, not np.float32(5.0))."""
    return repr(x.item() if hasattr(x, "item") else x)


def _first_mismatch(outs, want, masks=None) -> str | None:
    for r, (o, e) in enumerate(zip(outs, want)):
        if e is None:
            continue
        o = np.asarray(o).reshape(-1)
        if o.shape != e.shape:
            return f"rank {r} output has {o.size} elements, expected {e.size}"
        wrong = o != e
        if masks is not None:
            wrong &= masks[r]
        bad = np.nonzero(wrong)[0]
        if len(bad) and np.issubdtype(e.dtype, np.inexact):  # NaN == NaN counts as equal
            bad = bad[~(np.isnan(o[bad]) & np.isnan(e[bad]))]
        if len(bad):
            i = int(bad[0])
            return (f"rank {r} output element {i} is {_num(o[i])}, expected {_num(e[i])} "
                    f"({len(bad)} of {e.size} elements wrong)")
    return None


#: nccl-tests' bus-bandwidth factor per collective (doc/PERFORMANCE.md), n ranks
BUSBW_FACTOR = {
    "allreduce": lambda n: 2 * (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "gather": lambda n: (n - 1) / n,
    "scatter": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
}


def timing_line(alg, nbytes: int, times: list[float], warmup: int) -> str:
    """Median time per call, algbw = size/time and busbw = algbw * nccl-tests' factor.

    >>> from msccl_py import ir
    >>> alg = ir.Algorithm("r", "allreduce", "Simple", True, 4, 4, 1)
    >>> timing_line(alg, 10**9, [0.5, 0.4, 0.6], 1)
    'median 500.000 ms over 3 calls after 1 warm-up, algbw 2.00 GB/s, busbw 3.00 GB/s'
    """
    t = float(np.median(times))
    algbw = nbytes / t / 1e9 if t > 0 else float("inf")
    factor = BUSBW_FACTOR.get(alg.collective)
    bus = f"{algbw * factor(alg.ngpus):.2f} GB/s" if factor else "n/a (custom collective)"
    calls = f"{len(times)} call{'s' if len(times) != 1 else ''}"
    warm = f"{warmup} warm-up{'s' if warmup != 1 else ''}"
    return f"median {t * 1e3:.3f} ms over {calls} after {warm}, algbw {algbw:.2f} GB/s, busbw {bus}"


def _applies_op(alg) -> bool:
    """Whether the reduction op matters: a reducing collective, or a custom one that reduces."""
    if alg.collective in ("allreduce", "reduce_scatter", "reduce"):
        return True
    return alg.collective == "custom" and any(
        st.op in ir.REDUCES for _, tb in alg.threadblocks() for st in tb.steps)


def _run_one(args, alg, label: str, postcondition: dict | None = None,
             judged: bool = True) -> int:
    from msccl_py.runtime.expected import expected, expected_from_postcondition
    from msccl_py.runtime.reference import default_inplace, dtype_of
    from msccl_py.plan.sizes import format_size, parse_size
    from msccl_py.verify import resolve_root
    if args.iters < 1 or args.warmup < 0:
        raise MscclRuntimeError(f"--iters must be at least 1 and --warmup at least 0 (got "
                                f"--iters {args.iters} --warmup {args.warmup})")
    fn = get_backend(args.backend)
    dtype = dtype_of(args.dtype)
    nbytes = parse_size(args.bytes)
    try:
        root = resolve_root(alg, args.root)
    except MscclError as exc:
        raise MscclRuntimeError(str(exc)) from None
    inputs = random_inputs(alg, nbytes, dtype, args.op, args.seed)
    inplace = default_inplace(alg) if args.inplace is None else args.inplace
    kwargs = {"op": args.op, "inplace": inplace}
    if getattr(args, "placement", None) is not None:
        if args.backend != "cupy":
            raise MscclRuntimeError("--placement applies to the cupy backend only")
        kwargs["placement"] = args.placement
    if args.slice_elems is not None:
        if args.backend != "reference":
            raise MscclRuntimeError("--slice-elems applies to the reference backend only")
        kwargs["slice_elems"] = args.slice_elems
    masks = None
    if postcondition is not None:
        want, masks = expected_from_postcondition(alg, inputs, args.op, postcondition)
    else:
        want = expected(alg, inputs, args.op, root=root)
    op = f" {args.op}" if _applies_op(alg) else ""
    rooted = f" root {root}" if alg.collective in ir.ROOTED else ""
    what = (f"{args.backend}: {alg.collective} {label}{rooted} {format_size(nbytes)} "
            f"{args.dtype}{op} {'in-place' if inplace else 'out-of-place'}")
    times = []
    for call in range(args.warmup + args.iters):
        t0 = time.perf_counter()
        try:
            outs = fn(alg, inputs, **kwargs)
        except MscclDeadlockError as exc:
            print(f"{what}: DEADLOCK: {exc}")
            return 1
        if call >= args.warmup:
            times.append(time.perf_counter() - t0)
        # every call is checked: a runtime may go wrong only once warm
        bad = _first_mismatch(outs, want, masks)
        if bad:
            print(f"{what}: WRONG in call {call + 1}: {bad}")
            return 1
    # a program whose collective has no check() is compared with its own result only
    word = "correct" if judged else "matches the program's own result (nothing checks it)"
    print(f"{what}: {word}, {timing_line(alg, nbytes, times, args.warmup)}")
    return 0


def run(args) -> int:
    from msccl_py.mscclpp.read import is_plan_file
    if is_plan_file(args.file):      # an MSCCL++ JSON plan, told apart by content
        from msccl_py.mscclpp.commands import run_command
        return run_command(args)
    if args.file.endswith(".py"):
        from msccl_py.language.runner import run_program_file
        results = run_program_file(args.file, list(args.args))
        if not results:
            raise MscclError(f"{args.file} produced no XML() output to run")
        status = 0
        for res in results:
            if res.check_ok is False:
                print(f"{args.file}: {res.algorithm.name}: the program's Check() failed")
                print("\n".join(f"  {line}" for line in res.program.check_report))
                status = 1
            if res.program.verdict is not None:
                print(f"{res.algorithm.name}: compiled and verified: {res.program.verdict}")
            # a custom collective says what it computes through the program's own result
            post = res.program.postcondition() if res.algorithm.collective == "custom" else None
            status = max(status, _run_one(args, res.algorithm, res.algorithm.name, post,
                                          judged=res.program.judged is True))
        return status
    if args.args:
        raise MscclError(f"program arguments {' '.join(args.args)!r} given for an XML file")
    from msccl_py.xml import read_xml
    alg = read_xml(args.file)
    return _run_one(args, alg, alg.name)
