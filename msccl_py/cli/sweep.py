"""``run``'s timing as nccl-tests does it: warm-ups, timed calls, a median, algbw and busbw.

One size prints one line; ``-b``/``-e`` with ``-f`` (or ``-i``) sweep sizes
and print nccl-tests' table (size, count, type, redop, time, algbw, busbw,
#wrong). What is run comes as a :class:`Bench`: the XML and plan paths of
``run`` build one each, so both print the same way.

>>> sizes = sweep_sizes(8, 128 << 20, factor=2)
>>> len(sizes), sizes[:3], sizes[-1]
(25, [8, 16, 32], 134217728)
>>> fit_sizes([8, 16, 48, 64], step=32, lo=0, hi=1 << 40)
([32, 64], [8, 16])
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from msccl_py.errors import MscclDeadlockError, SizeError
from msccl_py.plan.sizes import format_size
from msccl_py.progress import Progress
from msccl_py.simulate.results import busbw_factor

#: nccl-tests' names of the element types (its ``type`` column)
NCCL_TYPE = {"float32": "float", "float16": "half", "float64": "double", "bfloat16": "bfloat16",
             "int8": "int8", "uint8": "uint8", "int32": "int32", "uint32": "uint32",
             "int64": "int64", "uint64": "uint64"}
#: collectives nccl-tests reports a busbw factor for; others (custom) get none
BUS_COLLECTIVES = ("allreduce", "allgather", "reduce_scatter", "alltoall", "broadcast",
                   "reduce", "gather", "scatter")


@dataclass
class Call:
    """One size, ready to run: ``run()`` makes a call, ``check(outs)`` returns
    ``(wrong elements, first mismatch or None)``."""

    run: Callable[[], list]
    check: Callable[[list], tuple[int, str | None]]


@dataclass
class Bench:
    """What ``run`` times: one algorithm on one backend with one dtype, op and placement.

    ``what`` heads its lines (``shm: allreduce ring``); ``step`` is the byte
    multiple its sizes need and ``lo``..``hi`` the sizes it accepts;
    ``prepare(nbytes)`` makes random inputs and the expected result.
    """

    what: str
    collective: str
    nranks: int
    dtype: str
    op: str | None          # None: a collective that does not reduce
    inplace: bool
    step: int
    lo: int
    hi: int
    prepare: Callable[[int], Call]
    #: said instead of "correct" when nothing says what the result should be
    unjudged: str | None = None
    #: bytes of memory a call of a size holds, every rank and staging copy together
    #: (checked against what the machine has free before the first call)
    need: Callable[[int], int] | None = None
    #: the verifier's deadlock model at a size: what waits on what, or None (run before
    #: any rank starts, so a deadlock is said at once, not after the runtime's timeout)
    deadlock: Callable[[int], str | None] | None = None


@dataclass
class Measured:
    times: list[float]
    wrong: int = 0
    first: str | None = None    # the first mismatch
    wrong_call: int = 0         # 1-based call that was wrong first
    deadlock: str | None = None


def measure(call: Call, warmup: int, iters: int, progress: Progress | None = None,
            offset: int = 0) -> Measured:
    """``warmup`` untimed calls, then ``iters`` timed ones; every call is checked (a runtime
    may go wrong only once warm) and the timing stops at the first wrong one."""
    out = Measured([])
    for k in range(warmup + iters):
        t0 = time.perf_counter()
        try:
            outs = call.run()
        except MscclDeadlockError as exc:
            out.deadlock = str(exc)
            return out
        if k >= warmup:
            out.times.append(time.perf_counter() - t0)
        if progress is not None:
            progress.update(offset + k + 1)
        wrong, first = call.check(outs)
        if wrong:
            out.wrong, out.first, out.wrong_call = wrong, first, k + 1
            return out
    return out


def bandwidths(bench: Bench, nbytes: int, t: float) -> tuple[float, float | None]:
    """algbw = size / time and busbw = algbw * nccl-tests' factor (None: custom), GB/s."""
    algbw = nbytes / t / 1e9 if t > 0 else float("inf")
    if bench.collective not in BUS_COLLECTIVES:
        return algbw, None
    return algbw, algbw * busbw_factor(bench.collective, bench.nranks)


def timing_text(bench: Bench, nbytes: int, times: list[float], warmup: int) -> str:
    """``median T ms over N calls after W warm-ups, algbw A GB/s, busbw B GB/s``."""
    t = float(np.median(times))
    algbw, busbw = bandwidths(bench, nbytes, t)
    bus = f"{busbw:.2f} GB/s" if busbw is not None else "n/a (custom collective)"
    return (f"median {t * 1e3:.3f} ms over {_count(len(times), 'call')} after "
            f"{_count(warmup, 'warm-up')}, algbw {algbw:.2f} GB/s, busbw {bus}")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' if n != 1 else ''}"


def line_head(bench: Bench, nbytes: int | None = None) -> str:
    """``shm: allreduce ring 1 MiB float32 sum in-place`` (no size: the sweep's header)."""
    size = f" {format_size(nbytes)}" if nbytes is not None else ""
    op = f" {bench.op}" if bench.op else ""
    return (f"{bench.what}{size} {bench.dtype}{op} "
            f"{'in-place' if bench.inplace else 'out-of-place'}")


def run_one(bench: Bench, nbytes: int, warmup: int, iters: int) -> tuple[int, str]:
    """(exit status, the result line) for one size."""
    check_size(bench, nbytes)
    call = bench.prepare(nbytes)
    head = line_head(bench, nbytes)
    with Progress(f"{head}: calls", total=warmup + iters) as progress:
        m = measure(call, warmup, iters, progress)
    if m.deadlock:
        return 1, f"{head}: DEADLOCK: {m.deadlock}"
    if m.wrong:
        return 1, f"{head}: WRONG in call {m.wrong_call}: {m.first}"
    timing = timing_text(bench, nbytes, m.times, warmup)
    return 0, f"{head}: {bench.unjudged or 'correct'}, {timing}"


def check_size(bench: Bench, nbytes: int) -> None:
    """A SizeError naming the nearest sizes that run, unless ``nbytes`` runs."""
    if nbytes % bench.step == 0 and bench.lo <= nbytes <= bench.hi:
        return
    below = min(nbytes, bench.hi) // bench.step * bench.step
    above = max(nbytes, bench.lo - 1) // bench.step * bench.step + bench.step
    near = [format_size(s) for s in (below, above) if bench.lo <= s <= bench.hi and s > 0]
    raise SizeError(f"{format_size(nbytes)} is not a size this algorithm runs: "
                    f"{accepted(bench)}" + (f" (e.g. {' or '.join(near)})" if near else ""))


def accepted(bench: Bench) -> str:
    """What sizes the algorithm runs, in words."""
    text = f"it runs sizes that are multiples of {format_size(bench.step)}"
    if bench.lo > bench.step:
        text += f" from {format_size(bench.lo)}"
    if bench.hi < 1 << 62:
        text += f" up to {format_size(bench.hi)}"
    return text


def sweep_sizes(lo: int, hi: int, factor: float | None = None,
                step: int | None = None) -> list[int]:
    """nccl-tests' sizes: from ``lo`` to ``hi``, times ``factor`` or plus ``step`` bytes."""
    if lo <= 0 or hi < lo:
        raise SizeError(f"-b {lo} and -e {hi}: sizes must go up from a positive size")
    if step is not None and factor is not None:
        raise SizeError("give -f (a factor) or -i (an increment), not both")
    if step is not None and step <= 0:
        raise SizeError(f"-i must be a positive number of bytes, not {step}")
    if factor is not None and factor <= 1 and hi > lo:
        raise SizeError(f"-f must be more than 1 to go from {lo} to {hi} bytes")
    sizes, size = [], lo
    while size <= hi:
        sizes.append(size)
        if size == hi:
            break
        size = size + step if step is not None else max(size + 1, int(size * (factor or 2)))
    return sizes


def fit_sizes(sizes: list[int], step: int, lo: int, hi: int) -> tuple[list[int], list[int]]:
    """The sizes rounded down to multiples of ``step`` within [lo, hi] (each once, in order),
    and those that leave nothing to run."""
    kept, dropped = [], []
    for size in sizes:
        size_fit = min(size, hi) // step * step
        if size_fit < max(lo, 1):
            dropped.append(size)
        elif size_fit not in kept:
            kept.append(size_fit)
    return kept, dropped


TABLE_HEAD = (f"#{'size':>11} {'count':>13} {'type':>9} {'redop':>7} {'time':>10} "
              f"{'algbw':>7} {'busbw':>7} {'#wrong':>7}\n"
              f"#{'(B)':>11} {'(elements)':>13} {'':>9} {'':>7} {'(us)':>10} "
              f"{'(GB/s)':>7} {'(GB/s)':>7}")


def run_sweep(bench: Bench, sizes: list[int], warmup: int, iters: int, out) -> int:
    """nccl-tests' table for ``sizes``; exit status 1 when any size is wrong or deadlocks."""
    kept, dropped = fit_sizes(sizes, bench.step, bench.lo, bench.hi)
    if not kept:
        shown = ", ".join(format_size(s) for s in sizes[:4]) + (", ..." if len(sizes) > 4 else "")
        raise SizeError(f"no size of the sweep ({shown}) runs: {accepted(bench)}")
    if dropped or kept != sizes:
        left = ", ".join(format_size(s) for s in dropped)
        print(f"note: {accepted(bench)}: sizes are rounded down to one"
              + (f", and {left} left out" if dropped else ""), file=sys.stderr)
    itemsize = np.dtype(bench.dtype).itemsize
    print(f"# {line_head(bench)}: median of {_count(iters, 'timed call')} after "
          f"{_count(warmup, 'warm-up')} per size", file=out)
    print(TABLE_HEAD, file=out)
    status = 0
    total = len(kept) * (warmup + iters)
    with Progress(bench.what, total=total) as progress:
        for k, nbytes in enumerate(kept):
            progress.detail = format_size(nbytes)
            m = measure(bench.prepare(nbytes), warmup, iters, progress, k * (warmup + iters))
            cells = (f"{nbytes:>12} {nbytes // itemsize:>13} "
                     f"{NCCL_TYPE.get(bench.dtype, bench.dtype):>9} {bench.op or 'none':>7}")
            if m.deadlock:
                print(f"{cells} {'DEADLOCK':>10}", file=out)
                print(f"# {format_size(nbytes)}: DEADLOCK: {m.deadlock}", file=out)
                return 1
            t = float(np.median(m.times)) if m.times else 0.0
            algbw, busbw = bandwidths(bench, nbytes, t) if m.times else (0.0, 0.0)
            bus = f"{busbw:>7.2f}" if busbw is not None else f"{'n/a':>7}"
            print(f"{cells} {t * 1e6:>10.2f} {algbw:>7.2f} {bus} {m.wrong:>7}", file=out,
                  flush=True)
            if m.wrong:
                print(f"# {format_size(nbytes)}: WRONG in call {m.wrong_call}: {m.first}",
                      file=out)
                status = 1
    if bench.unjudged:
        print(f"# #wrong: {bench.unjudged}", file=out)
    return status

