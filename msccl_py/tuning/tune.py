"""The tuner: the fastest algorithm per message size, written as a directory a runtime loads.

Candidates are library programs for the collective, swept over instances,
protocols and (where a program has them) channel counts, or the XML files of
a directory; with ``synthesize`` also the schedules synthesis builds for the
machine (:func:`synthesized_candidates`), so one directory can mix library,
NCCL-baseline and synthesized winners per size. Each is simulated at every sample size; :mod:`.ranges` finds
the exact sizes where the best changes and merges neighbours whose winners
are within 2%. In-place and out-of-place calls are tuned apart when their
candidates differ (a candidate serves a kind when it verifies in it).

The output directory holds only XML files, since msccl-executor-nccl and
RCCL parse every regular file of ``MSCCL_ALGO_DIR``; ``minBytes``/``maxBytes``
tile [0, ∞) under the target's own rule (:mod:`.selection`). The table and
the list of files written sit in its ``report/`` folder, which they skip.

>>> import tempfile
>>> tmp = tempfile.TemporaryDirectory()
>>> out = tune("allgather", "mi300x", f"{tmp.name}/out", programs=["allgather_ring"],
...            sizes="1KiB,1MiB", instances=(1,), channels=(1, 8), cache_dir=f"{tmp.name}/c")
>>> r = out.tilings["out-of-place"]
>>> r[0].lo, r[-1].hi, [f.min_bytes for f in out.files][:1]
(0, None, [0])
>>> tmp.cleanup()
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from msccl_py import ir, library, toolchain
from msccl_py.errors import MscclError, ProgramError
from msccl_py.simulate import machine_model, parse_sizes, simulate
from msccl_py.topologies import load
from msccl_py.tuning import selection
from msccl_py.tuning.nccl import nccl_choice, simulate_nccl
from msccl_py.tuning.ranges import Range, Timer, merge, partition, probes
from msccl_py.tuning.report import table
from msccl_py.verify import verify
from msccl_py.targets.msccl import read_xml

#: instances and channel counts tried for library programs
INSTANCES = (1, 2, 4)
CHANNELS = (1, 2, 4, 8, 16)
IN_PLACE, OUT_OF_PLACE = "in-place", "out-of-place"
KINDS = (IN_PLACE, OUT_OF_PLACE)
#: the folder of the output directory that holds the table and the list of files
REPORT = "report"


@dataclass(frozen=True)
class Candidate:
    """One algorithm the tuner may pick: a label, its IR and the call kinds it is correct for."""

    label: str
    alg: ir.Algorithm
    kinds: tuple[str, ...] = ()

    def admits(self, nbytes: int) -> bool:
        """True when ``nbytes`` is inside the algorithm's verified size window."""
        a = self.alg
        return nbytes >= a.min_bytes and (a.max_bytes == 0 or nbytes <= a.max_bytes)


@dataclass
class TunedFile:
    """One XML written: the candidate, the call kinds it serves, its sizes ``lo..hi``
    (inclusive; ``hi`` None = no bound) and the attributes that select them."""

    path: Path
    winner: int
    kinds: tuple[str, ...]
    lo: int
    hi: int | None
    min_bytes: int
    max_bytes: int
    worst: float
    granule: int
    powers: tuple[int, int] = (0, 0)  # powers of two in the range it runs, of those that are calls


@dataclass
class TuneResult:
    """Candidates, their simulated times (µs, ``inf`` where not admitted) per sample, the ranges
    per call kind (a kind no candidate serves is absent), the files, what was skipped.

    ``nccl[j]`` is the candidate NCCL itself would run at sample ``j`` (its
    model's algorithm and protocol, one instance), when it is among them;
    ``nccl_us[j]`` / ``nccl_runs[j]`` what ``simulate nccl`` gives NCCL's own choice
    there (time, ``algorithm/protocol xchannels``), the baseline every winner is
    measured against; empty with ``nccl_why`` saying why where it cannot be built.
    """

    candidates: list[Candidate]
    sizes: list[int]
    times: list[list[float]]
    tilings: dict[str, list[Range]]
    files: list[TunedFile]
    skipped: list[str]
    nccl: list[int | None]
    notes: list[str]
    target: str
    dtype: str
    out_dir: Path
    load_order: list[TunedFile]
    nccl_us: list[float] = field(default_factory=list)
    nccl_runs: list[str] = field(default_factory=list)
    nccl_why: str = ""


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


def call_kinds(alg: ir.Algorithm) -> tuple[str, ...]:
    """The call kinds ``alg`` is correct for: those it declares, and the other when it verifies
    in it too (an out-of-place allgather often works in place). One that writes no output
    chunk cannot be right out of place, and is not verified there."""
    writes_output = any(st.dst is not None and st.dst.buffer == ir.OUTPUT
                        for _, tb in alg.threadblocks() for st in tb.steps)
    return tuple(kind for kind, declared in ((IN_PLACE, alg.inplace),
                                             (OUT_OF_PLACE, alg.outofplace or not alg.inplace))
                 if declared or ((kind == IN_PLACE or writes_output)
                                 and verify(alg, inplace=kind == IN_PLACE).status == "ok"))


def library_candidates(collective: str, topology: str, ranks: int, nodes: int | None = None,
                       programs: list[str] | None = None, instances: tuple[int, ...] = INSTANCES,
                       channels: tuple[int, ...] = CHANNELS, cache_dir: str | Path | None = None,
                       target: str = "msccl-executor", gpus_per_node: int | None = None
                       ) -> tuple[list[Candidate], list[str]]:
    """Library programs for ``collective`` (or only ``programs``) compiled for ``target``'s
    limits, and what was skipped. Compiles go through the library's cache (``cache_dir``,
    default the user's). With ``gpus_per_node`` (a layout on each machine's first GPUs),
    programs built on the whole machine file (NCCL's rings and trees) are skipped, said so."""
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
        if gpus_per_node is not None and any(p.name == "topology" for p in spec.params):
            skipped.append(f"{spec.name}: builds on every GPU of {topology}, and the layout "
                           f"runs {gpus_per_node} ranks on each machine")
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
                                              cache_dir=cache_dir, target=target, **params)
                    except MscclError as exc:
                        skipped.append(f"{label}: {exc}")
                        continue
                    out.append(Candidate(label, alg, call_kinds(alg)))
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
        out.append(Candidate(f"{path.stem} {alg.protocol}", alg, call_kinds(alg)))
    return out, skipped


#: what synthesis is asked for: its bandwidth schedule (judged at 1 GiB) and its latency one
SYNTH_OBJECTIVES = ("bandwidth", "latency")


def synthesized_candidates(collective: str, topology: str, nodes: int | None = None,
                           target: str = "msccl-executor",
                           objectives: tuple[str | int, ...] = SYNTH_OBJECTIVES
                           ) -> tuple[list[Candidate], list[str]]:
    """The schedules synthesis builds for ``collective`` on ``topology`` (one per objective,
    at the protocol it won with and at LL128), each fitted to ``target``'s limits and
    verified, and what was skipped (synthesis needs HiGHS, the ``synth`` extra)."""
    from msccl_py.synthesis import synthesize
    from msccl_py.synthesis.lp import available
    from msccl_py.tuning.nccl_sim import nccl_time
    from msccl_py.targets.msccl import check_limits
    if not available():
        return [], ["synthesized: needs HiGHS (pip install 'msccl-py[synth]')"]
    out: list[Candidate] = []
    skipped: list[str] = []
    seen: set = set()
    for objective in objectives:
        try:
            s = synthesize(topology, collective, nodes=nodes, objective=objective,
                           target=target, nccl_time=nccl_time(topology, collective, nodes))
        except MscclError as exc:
            skipped.append(f"synthesized {objective}: {exc}")
            continue
        c = s.chosen
        for proto in dict.fromkeys((c.protocol, "LL128")):
            key = (c.label, c.instances, proto)
            if key in seen:
                continue
            seen.add(key)
            label = f"synth_{objective} {c.label} x{c.instances} {proto}"
            alg = s.algorithm
            if proto != c.protocol:
                try:
                    prog = s.program(protocol=proto)
                    with prog:
                        alg = prog.lower()
                    check_limits(alg, target)
                except MscclError as exc:
                    skipped.append(f"{label}: {exc}")
                    continue
                if verify(alg, target=target).status != "ok":
                    skipped.append(f"{label}: does not verify")
                    continue
            out.append(Candidate(label, replace(alg, name=f"synth_{collective}_{objective}"),
                                 call_kinds(alg)))
    return out, skipped


def _meta(c: Candidate) -> selection.AlgoMeta:
    return selection.AlgoMeta(c.alg.collective, c.alg.ngpus, c.alg.nchunksperloop, 0, None,
                              IN_PLACE in c.kinds, OUT_OF_PLACE in c.kinds)


def _powers(lo: int, hi: int | None, sizes: list[int]) -> set[int]:
    """The powers of two in ``lo..hi``, up to the last sample when ``hi`` is None."""
    top = sizes[-1] if hi is None else hi
    return {1 << k for k in range(63) if lo <= 1 << k <= top}


def _runs(meta: selection.AlgoMeta, points, size: int, target: str) -> tuple[int, int]:
    """(how many of ``points`` that are calls ``meta``'s chunk count takes, how many are calls)."""
    unit = selection.call_unit(meta.collective, meta.ngpus, size)
    calls = [n for n in points if n % unit == 0]
    return sum(selection.takes(meta, n, size, target) for n in calls), len(calls)


def _takes(candidates: list[Candidate], size: int, target: str) -> Callable[[int, int], bool]:
    """``takes(i, nbytes)``: whether candidate i is admitted at a size as far as its chunk
    count goes. Calls are mostly powers of two: at one that some candidate's chunk count
    takes, one whose count does not is not admitted (the runtime would run NCCL there, so
    it must not win there; on dgx-h100 nccl_ring x2's 192 chunks take multiples of 768 B,
    no power of two), nor between two such powers. A power nothing takes judges by time."""
    metas = [_meta(c) for c in candidates]
    anyone: dict[int, bool] = {}

    def at_power(i: int, power: int) -> bool:
        if selection.takes(metas[i], power, size, target):
            return True
        if power not in anyone:
            anyone[power] = any(selection.takes(m, power, size, target) for m in metas)
        return not anyone[power]

    def takes(i: int, nbytes: int) -> bool:
        below = 1 << (nbytes.bit_length() - 1)
        return at_power(i, below) or (below != nbytes and at_power(i, 2 * below))
    return takes


def _misses(candidates: list[Candidate], sizes: list[int], size: int, target: str):
    """``prefer`` for :func:`~.ranges.merge`: how many of the powers of two and samples in a
    range are calls that a candidate's chunk count cannot take (they would run NCCL)."""
    def count(i: int, lo: int, hi: int | None) -> int:
        top = sizes[-1] if hi is None else hi
        points = _powers(lo, hi, sizes) | {s for s in sizes if lo <= s <= top}
        runs, calls = _runs(_meta(candidates[i]), points, size, target)
        return calls - runs
    return count


def _prepare(out: Path) -> list[str]:
    """Names of a previous tune's files in ``out``; refuses a directory holding other files,
    which the runtime would load along with the tuned ones."""
    manifest = out / REPORT / "files.txt"
    old = manifest.read_text().split() if manifest.is_file() else []
    if out.exists():
        if not out.is_dir():
            raise MscclError(f"{out}: exists and is not a directory")
        strangers = sorted(p.name for p in out.iterdir()
                           if not p.is_dir() and p.name not in old)
        if strangers:
            shown = ", ".join(strangers[:4]) + (", ..." if len(strangers) > 4 else "")
            raise MscclError(f"{out}: holds {shown}, not written by tune; the runtime loads "
                             "every file of an algorithm directory, so choose an empty or new "
                             "one")
    return old


def _file_groups(tilings: dict[str, list[Range]], one_kind: bool) -> list[list[tuple[str, Range]]]:
    """Ranges grouped by the file that serves them: the same range and winner in both call kinds
    share one file unless the runtime reads one kind per file."""
    groups: dict[tuple, list[tuple[str, Range]]] = {}
    for kind, ranges in tilings.items():
        for r in ranges:
            key = (kind,) if one_kind else ()
            groups.setdefault((r.lo, r.hi, r.winner) + key, []).append((kind, r))
    return sorted(groups.values(), key=lambda g: (g[0][1].lo, KINDS.index(g[0][0])))


def write_ranges(candidates: list[Candidate], tilings: dict[str, list[Range]],
                 out_dir: str | Path, target: str = "msccl-executor",
                 dtype: str = "float32") -> list[TunedFile]:
    """One XML per range (per call kind where they differ), each read back and verified."""
    out = Path(out_dir)
    old = _prepare(out)
    out.mkdir(parents=True, exist_ok=True)
    for name in old:
        (out / name).unlink(missing_ok=True)
    rule, size = selection.rule(target), selection.itemsize(dtype)
    plan = []
    for k, group in enumerate(_file_groups(tilings, rule.one_kind_per_file)):
        kinds = tuple(kind for kind in KINDS if kind in {g[0] for g in group})
        stem = "".join(ch if ch.isalnum() else "_"
                       for ch in candidates[group[0][1].winner].label).strip("_")
        suffix = "" if len(kinds) == len(tilings) else "." + kinds[0].replace("-", "")
        plan.append((out / f"{k:02d}_{stem}{suffix}.xml", group, kinds))
    # the list first, so a run that fails half way is cleaned up by the next
    (out / REPORT).mkdir(exist_ok=True)
    (out / REPORT / "files.txt").write_text("".join(f"{p.name}\n" for p, _, _ in plan))
    files = []
    for k, (path, group, kinds) in enumerate(plan):
        r = group[0][1]
        c = candidates[r.winner]
        lo, top = selection.bounds(target, r.lo, r.hi)
        alg = replace(c.alg, name=f"{c.alg.name}_{k}", min_bytes=lo, max_bytes=top,
                      inplace=IN_PLACE in kinds, outofplace=OUT_OF_PLACE in kinds)
        # the file read back is verified below, over the range it is written for
        path.write_text(toolchain.compile(alg, target, toolchain.Policy(verify=False)).text)
        meta = selection.read_meta(path)
        if selection.window(meta, target) != (r.lo, r.hi):
            raise MscclError(f"{path}: written for sizes {r.lo}..{r.hi} but {target} would "
                             f"select it for {selection.window(meta, target)}")
        back = read_xml(path)
        if r.hi is not None:  # the reader takes maxBytes as inclusive; check the range itself
            back = replace(back, max_bytes=r.hi)
        verdict = verify(back, target=target)
        if verdict.status != "ok":
            raise MscclError(f"{path}: the tuned XML does not verify: {verdict}")
        for _, rg in group:
            rg.file = path
        files.append(TunedFile(path, r.winner, kinds, r.lo, r.hi, lo, top, r.worst,
                               selection.granule(meta, size, target)))
    return files


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


class NcclBaseline:
    """``simulate nccl``'s time (µs) of NCCL's own choice per size on the tuned machine,
    computed once per size; ``why`` says why there is none (then every time is None)."""

    def __init__(self, collective: str, topo, machine):
        self.collective, self.topo, self.machine = collective, topo, machine
        self.memo: dict[int, Any] = {}
        self.why = ""

    def __call__(self, nbytes: int):
        """(time µs, what NCCL runs) at ``nbytes``, None when there is no baseline."""
        if self.why:
            return None
        if nbytes not in self.memo:
            try:
                r, = simulate_nccl(self.topo, self.collective, [nbytes], machine=self.machine)
            except MscclError as exc:
                self.why = f"NCCL's baseline cannot be built: {exc}"
                return None
            self.memo[nbytes] = (r.time_us, f"{r.algorithm}/{r.protocol} x{r.channels}")
        return self.memo[nbytes]


def _gain(f: TunedFile, timer: Timer, nccl: NcclBaseline, grid: list[int]) -> float | None:
    """Geometric mean over the file's range of NCCL's own choice's time (simulate nccl)
    over the file's (None where there is no NCCL baseline)."""
    logs = []
    for s in probes(f.lo, f.hi, grid):
        base = nccl(s)
        if base is not None and not math.isinf(timer(f.winner, s)):
            logs.append(math.log(base[0] / timer(f.winner, s)))
    return math.exp(sum(logs) / len(logs)) if logs else None


def nccl_wins(samples: list[int], best: list[float], nccl: NcclBaseline) -> str | None:
    """The note saying where NCCL's own choice beats every candidate, None where it never
    does."""
    from msccl_py.plan.sizes import format_size
    won = [(s, nccl(s)) for s, t in zip(samples, best)
           if nccl(s) is not None and nccl(s)[0] < t]
    if not won:
        return None
    runs = sorted({w[1][1] for w in won})
    return (f"NCCL's own choice ({', '.join(runs)}) is faster than every candidate at "
            f"{', '.join(format_size(s) for s, _ in won)}: leave those sizes to NCCL "
            f"(see 'vs nccl')")


def tune(collective: str, topology: str, out_dir: str | Path, *, nodes: int | None = None,
         ranks: int | None = None, candidates_dir: str | Path | None = None,
         programs: list[str] | None = None, sizes: str = "1KiB:4GiB",
         instances: tuple[int, ...] = INSTANCES, channels: tuple[int, ...] = CHANNELS,
         target: str = "msccl-executor", dtype: str = "float32",
         cache_dir: str | Path | None = None, gpus_per_node: int | None = None,
         synthesize: bool = False, only_candidates: bool = False) -> TuneResult:
    """Simulate the candidates on ``topology`` and write the winning ranges to ``out_dir``
    (``gpus_per_node``: a launch's ranks per host, on each machine's first GPUs;
    ``synthesize``: add the schedules synthesis builds for the machine). The XML files of
    ``candidates_dir`` join the library's programs (``programs``, else all), or with
    ``only_candidates`` are the only candidates."""
    if only_candidates and (candidates_dir is None or programs is not None):
        raise MscclError("--only-candidates tunes among the XML files of --candidates DIR "
                         "alone: give --candidates, and no --programs")
    rule, size = selection.rule(target), selection.itemsize(dtype)
    _prepare(Path(out_dir))
    topo = load(topology, nodes=nodes, gpus_per_node=gpus_per_node)
    n = topo.num_nodes() if ranks is None else ranks   # --ranks 0 is refused, not 'all'
    if n != topo.num_nodes():
        raise ProgramError(f"topology {topology!r} has {topo.num_nodes()} ranks, not {n}")
    candidates, skipped = [], []
    if candidates_dir is not None:
        candidates, skipped = xml_candidates(candidates_dir, collective, n)
    if not only_candidates:
        more, why = library_candidates(collective, topology, n, nodes, programs, instances,
                                       channels, cache_dir, target, gpus_per_node)
        candidates, skipped = candidates + more, skipped + why
    if synthesize:
        if gpus_per_node is not None:  # synthesis builds for whole machines
            raise MscclError("tune --synthesize works on whole machines: leave out --layout, "
                             "or tune the layout without --synthesize")
        more, why = synthesized_candidates(collective, topology, nodes, target)
        candidates, skipped = candidates + more, skipped + why
    if not candidates:
        raise MscclError(f"no {collective} candidates for {n} ranks"
                         + (f" ({'; '.join(skipped)})" if skipped else ""))
    machine = machine_model(topo)

    def time(i: int, nbytes: int) -> float:
        c = candidates[i]
        return simulate(c.alg, machine, nbytes, labels=False)[0].time_us if c.admits(nbytes) else math.inf

    timer = Timer(time)
    takes = _takes(candidates, size, target)
    # ranges are won only where the winner's chunk count lets it run (the times reported, and
    # NCCL's pick, which no chunk rule binds, stay as simulated)
    admitted = Timer(lambda i, nbytes: timer(i, nbytes) if takes(i, nbytes) else math.inf)
    samples = sorted(set(parse_sizes(sizes)))
    # the smallest call is compared too, so the first range is decided below the first sample
    floor = selection.call_unit(collective, n, size)
    grid = sorted({floor, *samples}) if floor < samples[0] else samples
    prefer = _misses(candidates, grid, size, target)
    tilings, notes = {}, []
    for kind in KINDS:
        among = [i for i, c in enumerate(candidates) if kind in c.kinds]
        if not among:
            notes.append(f"{kind} calls: no candidate serves them; NCCL runs them")
            continue
        try:
            tilings[kind] = merge(admitted, partition(admitted, grid, among), prefer)
        except MscclError as exc:
            notes.append(f"{kind} calls: NCCL runs them ({exc} among their candidates)")
    if not tilings:
        raise MscclError(f"no {collective} candidate covers every sample size: "
                         + "; ".join(notes))
    files = write_ranges(candidates, tilings, out_dir, target, dtype)
    for f in files:
        f.powers = _runs(_meta(candidates[f.winner]), _powers(f.lo, f.hi, samples), size, target)
    times = [[timer(i, s) for s in samples] for i in range(len(candidates))]
    order = files
    nccl = NcclBaseline(collective, topo, machine)
    best = [min(timer(i, s) for i in range(len(candidates))) for s in samples]
    won = nccl_wins(samples, best, nccl)
    if won:
        notes.append(won)
    if nccl.why:
        notes.append(f"no 'vs nccl' column: {nccl.why}")
    if len(files) > rule.max_algos:
        gains = {f.path: _gain(f, timer, nccl, grid) for f in files}
        note = (f"{target} loads at most {rule.max_algos} algorithms and ignores the rest, "
                f"whose sizes then run NCCL")
        if None in gains.values():
            notes.append(f"{note}; NCCL's own pick is not among the candidates, so the load "
                         "line cannot put the files that gain most over it first")
        else:
            order = sorted(files, key=lambda f: -gains[f.path])
            left = order[rule.max_algos:]
            notes.append(f"{note}: the load line lists the files by their gain over NCCL, so "
                         f"the {len(left)} it ignores ({', '.join(f.path.name for f in left)}) "
                         f"gain at most {max(gains[f.path] for f in left):.2f}x")
    base = [nccl(s) for s in samples]
    result = TuneResult(candidates, samples, times, tilings, files, skipped,
                        [_nccl_pick(candidates, collective, s, topo) for s in samples],
                        notes, target, dtype, Path(out_dir), order,
                        [b[0] for b in base] if not nccl.why else [],
                        [b[1] for b in base] if not nccl.why else [], nccl.why)
    report = Path(out_dir) / REPORT
    (report / "tune.txt").write_text(table(result) + "\n")
    return result
