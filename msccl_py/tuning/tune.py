"""The tuner: the fastest algorithm per message size, written as an MSCCL_ALGO_DIR.

Candidates are library programs for the collective, swept over instances,
protocols and (where a program has them) channel counts, or the XML files of
a directory. Each is simulated at every sample size; the winner at each
sample is the fastest candidate whose verified size window (``minBytes`` ..
``maxBytes``) admits it. Where the winner changes between two samples the
crossover is found by bisection, so every range's XML is the simulated best
across its range, not only at the samples. The ranges tile all sizes,
``[0, hi₀], [hi₀+1, hi₁], …, [hiₖ+1, ∞)``, in the bytes the runtimes compare
with ``minBytes``/``maxBytes`` (nccl-tests' ``size`` column).

>>> import tempfile
>>> out = tune("allgather", "mi300x", tempfile.mkdtemp(), programs=["allgather_ring"],
...            sizes="1KiB,1MiB", instances=(1,), channels=(1, 8), cache_dir=tempfile.mkdtemp())
>>> [(r.lo, r.hi) for r in out.ranges][0][0], out.ranges[-1].hi
(0, 0)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from msccl_py import ir, library
from msccl_py.errors import MscclError, ProgramError
from msccl_py.simulate import machine_model, parse_sizes, simulate
from msccl_py.topologies import load
from msccl_py.tuning.nccl import nccl_choice
from msccl_py.verify import verify
from msccl_py.xml import read_xml, write_xml

#: instances and channel counts tried for library programs
INSTANCES = (1, 2, 4)
CHANNELS = (1, 2, 4, 8, 16)
#: candidates this close to the best at a neighbouring sample may win between the samples
CONTENDER = 1.15


@dataclass(frozen=True)
class Candidate:
    """One algorithm the tuner may pick: a label for tables and file names, and its IR."""

    label: str
    alg: ir.Algorithm

    def admits(self, nbytes: int) -> bool:
        """True when ``nbytes`` is inside the algorithm's verified size window."""
        a = self.alg
        return nbytes >= a.min_bytes and (a.max_bytes == 0 or nbytes <= a.max_bytes)


@dataclass
class Range:
    """Sizes ``lo``..``hi`` (inclusive; ``hi`` 0 = no bound) and the candidate that wins them."""

    lo: int
    hi: int
    winner: int
    samples: list[int]
    file: Path | None = None


@dataclass
class TuneResult:
    """Candidates, their simulated times (µs, ``inf`` where not admitted) per sample, the ranges.

    ``nccl[j]`` is the candidate NCCL itself would run at sample ``j`` (its
    model's algorithm and protocol, one instance), when it is among them.
    """

    candidates: list[Candidate]
    sizes: list[int]
    times: list[list[float]]
    ranges: list[Range]
    skipped: list[str]
    nccl: list[int | None]


def _param_grid(spec, topology: str, nodes: int | None, ranks: int,
                channels: tuple[int, ...]) -> list[dict[str, Any]]:
    base: dict[str, Any] = {}
    names = {p.name for p in spec.params}
    if "topology" in names:
        base["topology"] = topology
        if nodes:
            base["nodes"] = nodes
    if "gpus_per_node" in names and nodes:
        base["gpus_per_node"] = ranks // nodes
    if "channels" not in names:
        return [base]
    p = spec.param("channels")
    return [{**base, "channels": c} for c in channels
            if (p.low is None or c >= p.low) and (p.high is None or c <= p.high)
            and spec.supports(ranks, **{**base, "channels": c})]


def _label(name: str, params: dict[str, Any], instances: int, protocol: str) -> str:
    shown = [f"{k}={v}" for k, v in params.items() if k not in ("topology", "nodes")]
    return " ".join([name, *shown, f"x{instances}", protocol])


def library_candidates(collective: str, topology: str, ranks: int, nodes: int | None = None,
                       programs: list[str] | None = None, instances: tuple[int, ...] = INSTANCES,
                       channels: tuple[int, ...] = CHANNELS,
                       cache_dir: str | Path | None = None) -> tuple[list[Candidate], list[str]]:
    """Compiled library programs for ``collective`` (or only ``programs``) and what was skipped.

    Compiles go through the library's cache (``cache_dir``, default the user's).
    """
    specs = [s for s in library.programs() if s.operation == collective]
    if programs is not None:
        known = {s.name for s in specs}
        unknown = [p for p in programs if p not in known]
        if unknown:
            raise ProgramError(f"no {collective} program named {', '.join(unknown)} "
                               f"(have: {', '.join(sorted(known))})")
        specs = [s for s in specs if s.name in programs]
    out, skipped = [], []
    for spec in specs:
        if spec.hierarchical and not nodes:
            skipped.append(f"{spec.name}: hierarchical, needs --nodes")
            continue
        for params in _param_grid(spec, topology, nodes, ranks, channels):
            try:
                spec.resolve(ranks, params)
            except ProgramError as exc:
                skipped.append(str(exc))
                break
            for inst in (i for i in instances if i <= spec.max_instances):
                for proto in spec.protocols:
                    label = _label(spec.name, params, inst, proto)
                    try:
                        alg = library.compile(spec.name, ranks, instances=inst, protocol=proto,
                                              cache_dir=cache_dir, **params)
                    except MscclError as exc:
                        skipped.append(f"{label}: {exc}")
                        continue
                    out.append(Candidate(label, alg))
    return out, skipped


def xml_candidates(directory: str | Path, collective: str, ranks: int) -> tuple[list[Candidate],
                                                                                list[str]]:
    """The XML files of ``directory`` that implement ``collective`` on ``ranks`` ranks."""
    directory = Path(directory)
    files = sorted(directory.glob("*.xml"))
    if not files:
        raise MscclError(f"{directory}: no .xml files to tune from")
    out, skipped = [], []
    for path in files:
        alg = read_xml(path)
        coll = "reduce_scatter" if alg.collective == "reducescatter" else alg.collective
        if coll != collective or alg.ngpus != ranks:
            skipped.append(f"{path.name}: {alg.collective} on {alg.ngpus} ranks")
            continue
        out.append(Candidate(f"{path.stem} {alg.protocol}", alg))
    return out, skipped


class _Timer:
    """Simulated time of candidate ``i`` at a size, ``inf`` outside its window, each once."""

    def __init__(self, candidates: list[Candidate], machine):
        self.candidates, self.machine, self.memo = candidates, machine, {}

    def __call__(self, i: int, nbytes: int) -> float:
        if (i, nbytes) not in self.memo:
            c = self.candidates[i]
            self.memo[i, nbytes] = (simulate(c.alg, self.machine, nbytes)[0].time_us
                                    if c.admits(nbytes) else math.inf)
        return self.memo[i, nbytes]

    def best(self, nbytes: int, among) -> int:
        return min(among, key=lambda i: (self(i, nbytes), i))


def _last_win(timer: _Timer, lo: int, hi: int, cur: int, among: list[int]) -> tuple[int, int]:
    """(last size where ``cur`` is the best of ``among``, first size where it is not) in [lo, hi].

    ``cur`` wins at ``lo`` and loses at ``hi``; they come back adjacent, so
    every size is decided (about 30 simulations of the contenders per crossover).
    """
    while hi - lo > 1:
        mid = min(max(int(round(math.sqrt(lo * hi))), lo + 1), hi - 1)
        if timer.best(mid, among) == cur:
            lo = mid
        else:
            hi = mid
    return lo, hi


def pick_ranges(candidates: list[Candidate], machine, sizes: list[int]) -> tuple[list[list[float]],
                                                                               list[Range]]:
    """Simulated times per candidate and sample, and the winning ranges tiling [0, ∞).

    Between two samples with different winners, the sizes where the winner
    changes are found by bisection among the candidates within
    ``CONTENDER`` of the best at either sample.
    """
    timer = _Timer(candidates, machine)
    everyone = range(len(candidates))
    times = [[timer(i, s) for s in sizes] for i in everyone]
    winners = []
    for j, s in enumerate(sizes):
        best = min(everyone, key=lambda i: (times[i][j], i))
        if math.isinf(times[best][j]):
            raise MscclError(f"no candidate is verified for {s} bytes")
        winners.append(best)
    ranges = [Range(0, 0, winners[0], [sizes[0]])]
    for j in range(1, len(sizes)):
        cur, pos = ranges[-1].winner, sizes[j - 1]
        among = [i for i in everyone
                 if times[i][j - 1] <= CONTENDER * times[winners[j - 1]][j - 1]
                 or times[i][j] <= CONTENDER * times[winners[j]][j]]
        while cur != winners[j]:
            edge, pos = _last_win(timer, pos, sizes[j], cur, among)
            ranges[-1].hi = edge
            cur = timer.best(pos, among)
            ranges.append(Range(edge + 1, 0, cur, []))
        ranges[-1].samples.append(sizes[j])
    return times, ranges


def write_ranges(candidates: list[Candidate], ranges: list[Range], out_dir: str | Path,
                 target: str = "msccl-executor") -> None:
    """One XML per range with its minBytes/maxBytes; each is read back and verified."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for k, r in enumerate(ranges):
        c = candidates[r.winner]
        stem = "".join(ch if ch.isalnum() else "_" for ch in c.label).strip("_")
        alg = replace(c.alg, name=f"{c.alg.name}_{k}", min_bytes=r.lo, max_bytes=r.hi)
        path = out / f"{k:02d}_{stem}.xml"
        path.write_text(write_xml(alg, target=target))
        verdict = verify(read_xml(path), target=target)
        if verdict.status != "ok":
            raise MscclError(f"{path}: the tuned XML does not verify: {verdict}")
        r.file = path


_NCCL_PROGRAMS = {("allreduce", "Ring"): "nccl_ring", ("allreduce", "Tree"): "nccl_tree",
                  ("allgather", "Ring"): "nccl_ring_allgather",
                  ("reduce_scatter", "Ring"): "nccl_ring_reduce_scatter"}


def _nccl_pick(candidates: list[Candidate], collective: str, nbytes: int, topo) -> int | None:
    """Index of the candidate NCCL's model would run at ``nbytes``, if it is a candidate."""
    if (collective, "Ring") not in _NCCL_PROGRAMS:
        return None
    algo, proto = nccl_choice(collective, nbytes, topo)
    label = f"{_NCCL_PROGRAMS[collective, algo]} x1 {proto}"
    return next((i for i, c in enumerate(candidates) if c.label == label), None)


def _bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return f"{n}B"


def table(result: TuneResult) -> str:
    """What won where, its time, and how much faster it is than the runner-up and than NCCL.

    "vs nccl" is NCCL's own pick at that size (see :mod:`msccl_py.tuning.nccl`)
    over the winner.
    """
    rows = [f"{'sizes':<24} {'winner':<40} {'time us':>10} {'runner-up':<40} {'margin':>7} "
            f"{'vs nccl':>8}"]
    for r in result.ranges:
        hi = "inf" if r.hi == 0 else _bytes(r.hi)
        if not r.samples:
            rows.append(f"{_bytes(r.lo) + '..' + hi:<24} {result.candidates[r.winner].label:<40} "
                        f"{'-':>10} (between samples)")
        for s in r.samples:
            j = result.sizes.index(s)
            column = [t[j] for t in result.times]
            win = column[r.winner]
            others = sorted((t, i) for i, t in enumerate(column) if i != r.winner)
            runner = others[0] if others and not math.isinf(others[0][0]) else None
            margin = f"{runner[0] / win:.2f}x" if runner else "-"
            k = result.nccl[j]
            vs = f"{column[k] / win:.2f}x" if k is not None and not math.isinf(column[k]) else "-"
            where = f"{_bytes(r.lo)}..{hi} @{_bytes(s)}"
            name = result.candidates[runner[1]].label if runner else "-"
            rows.append(f"{where:<24} {result.candidates[r.winner].label:<40} {win:>10.2f} "
                        f"{name:<40} {margin:>7} {vs:>8}")
    return "\n".join(rows)


def tune(collective: str, topology: str, out_dir: str | Path, *, nodes: int | None = None,
         ranks: int | None = None, candidates_dir: str | Path | None = None,
         programs: list[str] | None = None, sizes: str = "1KiB:4GiB",
         instances: tuple[int, ...] = INSTANCES, channels: tuple[int, ...] = CHANNELS,
         target: str = "msccl-executor", cache_dir: str | Path | None = None) -> TuneResult:
    """Simulate the candidates on ``topology`` and write the winning ranges to ``out_dir``."""
    topo = load(topology, nodes=nodes)
    n = ranks or topo.num_nodes()
    if n != topo.num_nodes():
        raise ProgramError(f"topology {topology!r} has {topo.num_nodes()} ranks, not {n}")
    if candidates_dir is not None:
        candidates, skipped = xml_candidates(candidates_dir, collective, n)
    else:
        candidates, skipped = library_candidates(collective, topology, n, nodes, programs,
                                                 instances, channels, cache_dir)
    if not candidates:
        raise MscclError(f"no {collective} candidates for {n} ranks"
                         + (f" ({'; '.join(skipped)})" if skipped else ""))
    machine = machine_model(topo)
    samples = sorted(set(parse_sizes(sizes)))
    times, ranges = pick_ranges(candidates, machine, samples)
    write_ranges(candidates, ranges, out_dir, target)
    result = TuneResult(candidates, samples, times, ranges, skipped,
                        [_nccl_pick(candidates, collective, s, topo) for s in samples])
    (Path(out_dir) / "tune.txt").write_text(table(result) + "\n")
    return result
