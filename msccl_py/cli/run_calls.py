"""What ``msccl-py run`` does: random inputs, the calls on a backend, their checks and timing.

Apart from :mod:`msccl_py.cli.run` (the command's options) so that registering
the command imports neither NumPy nor the sweep.
"""

from __future__ import annotations

import sys

import numpy as np

from msccl_py import ir
from msccl_py.collective_table import REDUCING
from msccl_py.cli import check_input, say_notes
from msccl_py.cli.backends import get_backend
from msccl_py.cli.sweep import NCCL_TYPE, Bench, Call, run_one, run_sweep, sweep_sizes
from msccl_py.errors import MscclError, MscclRuntimeError, SizeError
from msccl_py.plan.sizes import format_size


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


def count_wrong(outs, want, masks=None) -> tuple[int, str | None]:
    """(wrong elements over every rank, the first of them described) of outputs ``outs``."""
    total, first = 0, None
    for r, (o, e) in enumerate(zip(outs, want)):
        if e is None:
            continue
        o = np.asarray(o).reshape(-1)
        if o.shape != e.shape:
            total += e.size
            first = first or f"rank {r} output has {o.size} elements, expected {e.size}"
            continue
        wrong = o != e
        if masks is not None:
            wrong &= masks[r]
        bad = np.nonzero(wrong)[0]
        if len(bad) and np.issubdtype(e.dtype, np.inexact):  # NaN == NaN counts as equal
            bad = bad[~(np.isnan(o[bad]) & np.isnan(e[bad]))]
        if len(bad):
            total += len(bad)
            if first is None:
                i = int(bad[0])
                first = (f"rank {r} output element {i} is {_num(o[i])}, expected {_num(e[i])} "
                         f"({len(bad)} of {e.size} elements wrong)")
    return total, first


def _applies_op(alg) -> bool:
    """Whether the reduction op matters: a reducing collective, or a custom one that reduces."""
    if alg.collective in REDUCING:
        return True
    return alg.collective == "custom" and any(
        st.op in ir.REDUCES for _, tb in alg.threadblocks() for st in tb.steps)


def xml_bench(args, alg, label: str, postcondition: dict | None = None,
              judged: bool = True, joined=None) -> Bench:
    # ``judged``: something says what the result should be (else it is compared with what
    # the program itself computes)
    """An XML algorithm on ``args.backend`` as ``run`` times it (``joined``: as one rank of
    the launch that started this process, see :mod:`.launch_run`)."""
    from msccl_py.runtime.expected import expected, expected_from_postcondition
    from msccl_py.plan.contract import default_inplace
    from msccl_py.verify import resolve_root
    fn = get_backend(args.backend) if joined is None else joined.fn
    dtype = _dtype(args.dtype)
    try:
        root = resolve_root(alg, args.root)
    except MscclError as exc:
        raise MscclRuntimeError(str(exc)) from None
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

    def prepare(nbytes: int) -> Call:
        inputs = random_inputs(alg, nbytes, dtype, args.op, args.seed)
        masks = None
        if postcondition is not None:
            want, masks = expected_from_postcondition(alg, inputs, args.op, postcondition)
        else:
            want = expected(alg, inputs, args.op, root=root)
        if joined is not None:
            return Call(lambda: fn(alg, inputs, **kwargs),
                        lambda outs: joined.check(count_wrong, outs, want, masks))
        return Call(lambda: fn(alg, inputs, **kwargs), lambda outs: count_wrong(outs, want, masks))

    def need(nbytes: int) -> int:
        # the backend's buffers, plus the inputs, the expected and the returned outputs
        from msccl_py.plan.tables import plan_for
        from msccl_py.plan.sizes import chunk_elems
        from msccl_py.runtime.memory import need_bytes
        S = chunk_elems(alg.nchunksperloop, nbytes, dtype.itemsize)
        # (a joined rank draws every rank's inputs and expected outputs too)
        cc = plan_for(alg).call_chunks
        return need_bytes([tuple(int(c) for c in row) for row in cc], S, dtype.itemsize,
                          inplace=inplace, staged=True)

    rooted = f" root {root}" if alg.collective in ir.ROOTED else ""
    where = "launch" if joined is not None else args.backend
    # the reference runtime finds a deadlock itself at once; the others wait out a timeout
    deadlock = None if args.backend == "reference" and joined is None else \
        _deadlock_model(alg, dtype.itemsize)
    # minBytes/maxBytes say where a runtime selects the algorithm; run calls it at any size
    return Bench(f"{where}: {alg.collective} {label}{rooted}", alg.collective, alg.ngpus,
                 args.dtype, args.op if _applies_op(alg) else None, inplace,
                 alg.nchunksperloop * dtype.itemsize, 1, UNBOUNDED, prepare,
                 None if judged else "matches the program's own result (nothing checks it)",
                 need, deadlock)


def _deadlock_model(alg, itemsize: int):
    """``deadlock(nbytes)``: the verifier's deadlock model in the size regime of a call of
    ``nbytes`` (as ``verify --bytes``), "N threadblocks stuck: X waits for Y; ..." or None."""
    from msccl_py.plan.events import simulate
    from msccl_py.plan.tables import plan_for
    from msccl_py.verify.core import regime_settings
    seen: dict[tuple, str | None] = {}

    def deadlock(nbytes: int) -> str | None:
        plan = plan_for(alg)
        (s,) = regime_settings(alg, plan, None, nbytes, itemsize).values()
        key = (s["iterations"], s["mac"], s["capacity"])
        if key not in seen:
            res = simulate(plan, *key)
            seen[key] = None if res.completed else (
                f"{res.blocked} threadblocks stuck: " + "; ".join(str(w) for w in res.cycle))
        return seen[key]
    return deadlock


def plan_bench(args, plan) -> Bench:
    """An MSCCL++ plan on ``args.backend`` (reference or shm) as ``run`` times it."""
    from msccl_py.cli.plans import no_xml_options
    from msccl_py.plan.mscclpp.geometry import geometry, plan_chunks
    from msccl_py.runtime.mscclpp.reference import reduce_op, run_reference
    from msccl_py.verify.mscclpp.plan_check import check_data, expected
    if args.args:
        raise MscclRuntimeError(f"program arguments {' '.join(args.args)!r} given for a plan")
    no_xml_options(args, ("placement", "slice_elems"))
    if args.inplace is not None and args.inplace != plan.inplace:
        raise MscclRuntimeError(f"this plan is {'in-place' if plan.inplace else 'out-of-place'} "
                                f"only")
    backends = {"reference": run_reference, "shm": _plan_shm}
    if args.backend not in backends:
        raise MscclRuntimeError(f"backend {args.backend!r} does not run MSCCL++ plans; choose "
                                f"{', '.join(backends)}")
    fn, dtype, reduce = backends[args.backend], _dtype(args.dtype), reduce_op(args.op)
    lo, hi = (-100, 101) if args.op in ("max", "min") else (-8, 9)
    if np.issubdtype(dtype, np.unsignedinteger):
        lo = 0
    checked = plan.collective in CHECKED_PLANS

    def need(nbytes: int) -> int:
        # each rank's buffers, plus its inputs, expected and returned outputs
        return sum((max(s["i"], s["o"]) if plan.inplace else s["i"] + s["o"]) + s["s"] +
                   s["i"] + 2 * s["o"] for s in geometry(plan, nbytes).sizes)

    def prepare(nbytes: int) -> Call:
        rng = np.random.default_rng(args.seed)
        inputs = [rng.integers(lo, hi, s["i"] // dtype.itemsize).astype(dtype)
                  for s in geometry(plan, nbytes).sizes]
        if plan.collective == "sendrecv":
            def check(outs):
                bad = check_data(plan, inputs, outs)
                return len(bad), (bad[0].removeprefix("incorrect: ") if bad else None)
        else:
            want = expected(plan, inputs, reduce)
            def check(outs):
                if want is None:   # nothing says what the result should be
                    return 0, None
                return count_wrong(outs, want)
        return Call(lambda: fn(plan, inputs, op=args.op), check)

    step = np.lcm(max(plan_chunks(plan), 1) * plan.buffer_alignment, dtype.itemsize)
    reduces = plan.collective in REDUCING
    return Bench(f"{args.backend}: {plan.collective} {plan.name}", plan.collective, plan.nranks,
                 args.dtype, args.op if reduces else None, plan.inplace, int(step),
                 plan.min_message_size, plan.max_message_size, prepare,
                 None if checked else f"ran; collective {plan.raw_collective!r} has no "
                                      f"postcondition to check", need)


#: plan collectives whose result is checked (mscclpp.verify.expected and check_data)
CHECKED_PLANS = ("allreduce", "allgather", "reduce_scatter", "alltoall", "sendrecv")
#: a size no call reaches
UNBOUNDED = 1 << 62


def _plan_shm(plan, inputs, op="sum"):
    from msccl_py.runtime.mscclpp.shm import run_shm
    return run_shm(plan, inputs, op=op)


def _dtype(name: str):
    from msccl_py.plan.contract import dtype_of
    return dtype_of(NCCL_NAMES.get(name, name))


#: nccl-tests' type names (``-d float``) to ours
NCCL_NAMES = {v: k for k, v in NCCL_TYPE.items() if v != k}


def _time(args, bench: Bench) -> int:
    """One size (``--bytes``) as one line, or a sweep (``-b``/``-e``) as nccl-tests' table."""
    from msccl_py.plan.sizes import parse_size
    if args.iters < 1 or args.warmup < 0:
        raise MscclRuntimeError(f"--iters must be at least 1 and --warmup at least 0 (got "
                                f"--iters {args.iters} --warmup {args.warmup})")
    sweep = args.minbytes is not None or args.maxbytes is not None
    if not sweep:
        if args.stepfactor is not None or args.stepbytes is not None:
            raise MscclRuntimeError("-f and -i step a sweep: give -b (and -e) too")
        nbytes = parse_size(args.bytes or "1MiB")
        _fits(bench, [nbytes])
        stuck = _deadlocks(bench, [nbytes])
        if stuck:
            if getattr(args, "prints", True):
                print(stuck, flush=True)
            return 1
        status, line = run_one(bench, nbytes, args.warmup, args.iters)
        if getattr(args, "prints", True):
            print(line, flush=True)
        return status
    if args.bytes is not None:
        raise MscclRuntimeError("--bytes runs one size; -b/-e sweep sizes: give one or the other")
    lo = parse_size(args.minbytes if args.minbytes is not None else args.maxbytes)
    hi = parse_size(args.maxbytes) if args.maxbytes is not None else lo
    step = parse_size(args.stepbytes) if args.stepbytes is not None else None
    factor = 2.0 if step is None and args.stepfactor is None else args.stepfactor
    sizes = sweep_sizes(lo, hi, factor, step)
    _fits(bench, sizes)
    stuck = _deadlocks(bench, sizes)
    if stuck:
        if getattr(args, "prints", True):
            print(stuck, flush=True)
        return 1
    return run_sweep(bench, sizes, args.warmup, args.iters,
                     sys.stdout if getattr(args, "prints", True) else _Quiet())


def _runnable(bench: Bench, sizes: list[int]) -> list[int]:
    """The sizes the algorithm runs (the others get their own message later)."""
    from msccl_py.cli.sweep import check_size
    runs = []
    for nbytes in sizes:
        try:
            check_size(bench, nbytes)
        except SizeError:
            continue
        runs.append(nbytes)
    return runs


def _deadlocks(bench: Bench, sizes: list[int]) -> str | None:
    """The DEADLOCK line of the first size the verifier's model deadlocks at, before any
    rank starts; None when none does."""
    from msccl_py.cli.sweep import line_head
    if bench.deadlock is None:
        return None
    for nbytes in _runnable(bench, sizes):
        stuck = bench.deadlock(nbytes)
        if stuck:
            return (f"{line_head(bench, nbytes)}: DEADLOCK (the verifier's model, found "
                    f"before starting ranks): {stuck}")
    return None


def _fits(bench: Bench, sizes: list[int]) -> None:
    """Refuse, before anything is allocated, sizes whose calls need more memory than the
    machine has free (a size the algorithm does not run is left to its own message)."""
    from msccl_py.runtime.memory import check_fits
    if bench.need is None:
        return
    runs = _runnable(bench, sizes)
    if runs:
        top = max(runs)
        check_fits(bench.need(top), f"{bench.what} at {format_size(top)} per rank")


class _Quiet:
    """Where the ranks but 0 of a launch write the sweep table."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


def run_command(args) -> int:
    """``msccl-py run``: the algorithm (file, program or plan) timed and checked."""
    from msccl_py.targets.mscclpp.read import is_plan_file
    if is_plan_file(args.file):      # an MSCCL++ JSON plan, told apart by content
        from msccl_py.targets.mscclpp.read import read_plan
        return _time(args, plan_bench(args, read_plan(args.file)))
    from msccl_py.cli.launch_run import joined_runner
    joined = joined_runner(args)
    args.prints = joined is None or joined.prints
    say = print if args.prints else (lambda *a, **k: None)
    if args.file.endswith(".py"):
        from msccl_py import toolchain
        arts = toolchain.run_program_file(args.file, list(args.args),
                                          on_artifact=say_notes if args.prints else None).artifacts
        if not arts:
            raise MscclError(f"{args.file} produced no XML() output to run")
        status = 0
        for art in arts:
            rec, alg = art.source, art.algorithm
            if rec.log.passed is False:
                say(f"{args.file}: {alg.name}: the program's Check() failed")
                say("\n".join(f"  {line}" for line in rec.log.report))
                status = 1
            if art.verdict is not None:
                say(f"{alg.name}: compiled and verified: {art.verdict}")
            # a custom collective says what it computes through the program's own result
            post = toolchain.postcondition(rec) if alg.collective == "custom" else None
            bench = xml_bench(args, alg, alg.name, post, judged=art.judged is True,
                              joined=joined)
            status = max(status, _time(args, bench))
    else:
        check_input(args.file, "run")
        if args.args:
            raise MscclError(f"program arguments {' '.join(args.args)!r} given for an XML file")
        from msccl_py.targets.msccl import read_xml
        alg = read_xml(args.file)
        status = _time(args, xml_bench(args, alg, alg.name, joined=joined))
    if joined is not None:
        crossed = joined.crossed()
        if crossed:
            say(crossed, flush=True)
    return status
