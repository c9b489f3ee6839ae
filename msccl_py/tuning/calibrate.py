"""Fitting a machine file to nccl-tests / rccl-tests logs of NCCL's ring, through the simulator.

This is ``msccl-py calibrate --algo Ring``; by default calibration fits each size as NCCL
itself ran it (:mod:`msccl_py.tuning.calibrate_nccl`). Both refuse unphysical fits
(:func:`refuse_unphysical`).

The fit adjusts exactly what ``msccl-py simulate`` reads from a machine file,
and judges each guess by simulating NCCL's ring (``nccl_ring``, or
``nccl_ring_allgather`` / ``nccl_ring_reduce_scatter``) built for the machine,
at every size of every log, as NCCL runs that size (its protocol and channel
count: :func:`~msccl_py.tuning.nccl.baseline_picks`, or the log's
``NCCL_PROTO``):

* per protocol, the latency it adds to every hop and its fixed cost per call
  (the file's ``protocol P latency T base T``), by least squares in relative
  error; where every log has the same hop count the two cannot be told apart
  and the fixed cost folds into the hop latency;
* the bandwidth a ring channel reaches: below its share of the links that is a
  threadblock limit (``threadblock BW``, and ``threadblock P BW`` where LL or
  LL128 rows need less than Simple's), above it the links are faster than the
  file says and their ``linktype`` bandwidth is raised (β).

An rccl-tests log is run as RCCL runs each size: its own tuning model picks
the ring's protocol (:mod:`msccl_py.tuning.rccl`), and where RCCL runs one of
the MSCCL algorithms it ships (on 8 MI300X: all-pairs allreduce from 1 KiB to
16 MiB) the row is fitted and simulated as the library's
``allreduce_allpairs`` with that protocol and channel count.

A written file simulated the same way reproduces the logs; :func:`round_trip`
fills :attr:`Calibration.rows` with its residual per size.

>>> RowFit("a100.log", 12, 1 << 20, "LL", 12, 20.0, 22.0).error
0.1
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from msccl_py.errors import LogError
from msccl_py.plan.sizes import format_size
from msccl_py.simulate import machine_model, simulate
from msccl_py.topologies import load
from msccl_py.topologies.library import find
from msccl_py.tuning.logs import Log
from msccl_py.tuning.minimax import minimax
from msccl_py.tuning.nccl import baseline_picks, simulate_baseline
from msccl_py.tuning.rccl import msccl_pick
from msccl_py.topologies.rings import ring_bandwidth, ring_search

#: the NCCL baseline program that reproduces each collective's log
PROGRAMS = {"allreduce": "nccl_ring", "allgather": "nccl_ring_allgather",
            "reduce_scatter": "nccl_ring_reduce_scatter"}
PROTOCOL_ORDER = ("Simple", "LL128", "LL")
#: a ring channel's rate is searched between these multiples of its share of the links
RATE_RANGE = (0.03, 4.0)
#: the fit minimises the largest error relative to these: rows from 64 KiB up count twice
TOLERANCE = ((1 << 16, 0.15), (0, 0.30))
#: hop latency and fixed cost are fitted apart when the hop latency's effect on the rows
#: varies by more than this share of its mean
SEPARABLE = 0.25


@dataclass(frozen=True)
class RowFit:
    """One row: where it came from, its size, how NCCL ran it, measured and modelled time."""

    source: str
    line: int
    size: int
    protocol: str
    channels: int
    measured_us: float
    model_us: float
    program: str = "nccl_ring"
    #: the times the log itself allows (:meth:`~msccl_py.tuning.logs.Log.time_ranges`)
    measured_range: tuple[float, float] | None = None

    @property
    def error(self) -> float:
        """(model - measured) / measured."""
        return (self.model_us - self.measured_us) / self.measured_us

    @property
    def settled_error(self) -> float:
        """The error against the nearest time the log allows (its ``measured_range``)."""
        lo, hi = self.measured_range or (self.measured_us, self.measured_us)
        nearest = min(max(self.model_us, lo), hi)
        return (self.model_us - nearest) / self.measured_us

    @property
    def noisy(self) -> bool:
        """The log itself says this row's out-of-place time is off, towards the model: by
        at least 1% of it (:attr:`settled_error` against :attr:`error`)."""
        return abs(self.settled_error) <= abs(self.error) - 0.01


@dataclass
class ProtocolFit:
    """A protocol's fitted hop latency and fixed cost (µs) and its own threadblock limit."""

    protocol: str
    hop_latency_us: float
    base_us: float
    threadblock_GBps: float | None = None


@dataclass
class Calibration:
    """The fitted machine: threadblock limit (None: none), the factor on the ring links'
    bandwidth, per-protocol fits, and the rows' residuals (filled by :func:`round_trip`)."""

    topology: Any
    reference: str
    threadblock_GBps: float | None
    beta_scale: float
    link_kind: str
    protocols: dict[str, ProtocolFit]
    notes: list[str] = field(default_factory=list)
    rows: list[RowFit] = field(default_factory=list)


@dataclass
class _Row:
    log: Log
    size: int
    time_us: float
    line: int
    program: str
    protocol: str
    channels: int
    alg: Any = None


def _prepare(logs: list[Log], topology: Any, protocol: str | None, algo: str | None) -> None:
    n = topology.num_nodes()
    for log in logs:
        log.algo = log.algo or algo or "Ring"
        log.nranks = log.nranks or n
        if protocol and not log.proto:
            log.proto = protocol
        if log.algo != "Ring":
            raise LogError(f"the log was measured with NCCL_ALGO={log.algo}; calibration fits "
                           f"ring runs (NCCL_ALGO=Ring)", log.source)
        if log.known_collective() not in PROGRAMS:
            raise LogError(f"calibration fits ring allreduce, allgather and reduce_scatter "
                           f"logs, not {log.collective}", log.source)
        if log.nranks != n:
            raise LogError(f"the log has {log.nranks} ranks, topology {topology.name!r} {n}",
                           log.source)
        log.rows = log.timed_rows()
        if not log.rows:
            raise LogError("the log has no rows above 0 bytes", log.source)
        bad = next((r for r in log.rows if r.time_us <= 0), None)
        if bad is not None:
            raise LogError(f"size {bad.size} has time {bad.time_us}", log.source, bad.line)


def _msccl(log: Log, row, topology: Any):
    """The MSCCL algorithm RCCL ran ``row`` of ``log`` with (None: its own ring). RCCL
    schedules MSCCL before, and whatever, NCCL_ALGO / NCCL_PROTO say; ``count`` is the
    row's, else floats' (rccl-tests' default type)."""
    if log.library != "RCCL":
        return None
    return msccl_pick(log.collective, row.size, row.count or row.size // 4, topology)


def _rows(logs: list[Log], topology: Any, reference: str) -> list[_Row]:
    from msccl_py import library
    out, algs = [], {}
    n = topology.num_nodes()
    for log in logs:
        program = PROGRAMS[log.collective]
        sizes = [r.size for r in log.rows]
        picks = baseline_picks(program, log.collective, sizes, topology, log.proto)
        for row, (proto, count) in zip(log.rows, picks):
            ms = _msccl(log, row, topology)
            key = (ms.program, ms.protocol, ms.instances) if ms else (program, proto, count)
            if key not in algs:
                algs[key] = (library.compile(ms.program, n, protocol=ms.protocol,
                                             instances=ms.instances, inplace=False) if ms else
                             library.compile(program, n, protocol=proto, topology=reference,
                                             rings=count))
            out.append(_Row(log, row.size, row.time_us, row.line, *key, algs[key]))
    return out


class _Model:
    """Simulated times of the rows for one guess of the parameters."""

    def __init__(self, topology: Any):
        self.base = machine_model(topology)
        self.files = dict(self.base.protocols)

    def machine(self, tb: float | None, scale: float, fits: dict[str, ProtocolFit]):
        m = self.base.with_bandwidth_scale(scale) if scale != 1.0 else self.base
        protos = dict(self.files)
        for p, f in fits.items():
            protos[p] = replace(protos[p], hop_latency_us=f.hop_latency_us, base_us=f.base_us,
                                threadblock_bw=f.threadblock_GBps)
        return replace(m, threadblock_bw=tb, protocols=protos)

    def times(self, rows: list[_Row], machine) -> np.ndarray:
        return np.array([simulate(r.alg, machine, [r.size], protocol=r.protocol,
                                  labels=False)[0].time_us for r in rows])


def _latency_fit(model: _Model, rows: list[_Row], tb, scale, fits, p: str, notes) -> None:
    """Hop latency and fixed cost of protocol ``p``: two Gauss-Newton steps of non-negative
    least squares in relative error (simulated time is nearly linear in both). Rows of one
    hop count cannot tell them apart: then the hop latency keeps its value (NCCL's figure)
    and the fixed cost is fitted, or, where that would go negative, the reverse."""
    y = np.array([r.time_us for r in rows])
    f = fits[p]
    for _ in range(2):
        at = model.times(rows, model.machine(tb, scale, fits))
        fits[p] = replace(f, hop_latency_us=f.hop_latency_us + 1.0)
        d = model.times(rows, model.machine(tb, scale, fits)) - at
        fits[p] = f
        # the hop latency is told apart from the fixed cost where its effect varies across
        # the rows: other hop counts, or pipelines that expose it once per iteration
        separable = np.ptp(d) > SEPARABLE * max(float(np.mean(d)), 1e-9)
        scale_ = y * _tolerance(rows)
        rest = (y - (at - f.base_us - f.hop_latency_us * d)) / scale_   # what both must explain
        ones = np.ones_like(y) / scale_
        if separable:
            base, hop = _minimax(np.stack([ones, d / scale_], axis=1), rest)
        else:
            hop = f.hop_latency_us
            base = _minimax(ones[:, None], rest - hop * d / scale_, signed=True)[0]
            if base < 0:
                base, hop = 0.0, _minimax((d / scale_)[:, None], rest)[0]
        f = fits[p] = replace(f, base_us=float(base), hop_latency_us=float(hop))
    if not separable and not any(n.startswith(f"{p}:") for n in notes):
        notes.append(f"{p}: the rows cannot tell hop latency from fixed cost, so the hop "
                     f"latency stays {f.hop_latency_us:.3g} us (NCCL's figure) and the fixed "
                     f"cost takes the rest" if f.base_us > 0 else f"{p}: the rows cannot tell "
                     f"hop latency from fixed cost; the hop latency takes it all")


def _tolerance(rows) -> np.ndarray:
    return np.array([next(t for lo, t in TOLERANCE if r.size >= lo) for r in rows])


def _minimax(a: np.ndarray, b: np.ndarray, signed: bool = False) -> np.ndarray:
    """Coefficients minimising the largest ``|a @ x - b|``, non-negative unless ``signed``."""
    return minimax(a, b, None if signed else np.zeros(a.shape[1]))


def _search(error, lo: float, hi: float) -> float:
    """Argmin of ``error`` over [lo, hi] on a log scale: a grid, then golden section."""
    grid = np.geomspace(lo, hi, 10)
    errs = [error(x) for x in grid]
    k = int(np.argmin(errs))
    seen = [(errs[k], float(grid[k]))]
    a, b = np.log(grid[max(k - 1, 0)]), np.log(grid[min(k + 1, len(grid) - 1)])
    g = (np.sqrt(5) - 1) / 2
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = error(np.exp(c)), error(np.exp(d))
    seen += [(fc, float(np.exp(c))), (fd, float(np.exp(d)))]
    for _ in range(9):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = error(np.exp(c))
            seen.append((fc, float(np.exp(c))))
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = error(np.exp(d))
            seen.append((fd, float(np.exp(d))))
    # where the rows are link-bound the error is flat in the rate: a tie keeps the lower
    # side (a plateau lies above the rate where the links start to bind), and the answer is
    # the best point evaluated, not the bracket's middle, which may sit on the plateau
    # beside the minimum (A100's GCM log: 0.84 on it, 0.38 at its edge)
    return min(seen)[1]


def _worst(model: _Model, rows, tb, scale, fits) -> float:
    """The largest error of ``rows`` relative to its tolerance."""
    y = np.array([r.time_us for r in rows])
    got = model.times(rows, model.machine(tb, scale, fits))
    return float(np.max(np.abs(got - y) / (y * _tolerance(rows))))


def fit_logs(logs: list[Log], topology: Any, protocol: str | None = None,
             algo: str | None = None) -> Calibration:
    """Fit ``topology``'s (a name or path) threadblock limits, protocol latencies and link
    bandwidth to ``logs`` (see the module docstring). ``protocol``/``algo`` stand in for logs
    that do not say their NCCL_PROTO/NCCL_ALGO (default: NCCL's own choice, Ring)."""
    if not logs:
        raise LogError("no logs to calibrate from")
    reference = str(topology)
    topo = load(reference)
    if (getattr(topo, "num_machines", 1) or 1) > 1:
        raise LogError(f"calibration fits one machine; {topo.name!r} is a cluster")
    _prepare(logs, topo, protocol, algo)
    rows = _rows(logs, topo, reference)
    model = _Model(topo)
    found = ring_search(topo)
    share = ring_bandwidth(topo, found.rings) / len(found.rings)   # GB/s per channel
    fits = {p: ProtocolFit(p, model.files[p].hop_latency_us, model.files[p].base_us)
            for p in PROTOCOL_ORDER if any(r.protocol == p for r in rows)}
    notes: list[str] = []
    msccl = sorted({r.size for r in rows if r.program not in PROGRAMS.values()})
    if msccl:
        notes.append(f"RCCL runs its MSCCL all-pairs allreduce at {len(msccl)} sizes "
                     f"({format_size(msccl[0])} - {format_size(msccl[-1])}); they are fitted and "
                     f"simulated as allreduce_allpairs")
    tb, scale = model.base.threadblock_bw, 1.0

    def rate_to(x: float) -> tuple[float | None, float]:
        return (x * share, 1.0) if x <= 1.0 else (None, x)

    for _ in range(2):
        if "Simple" in fits:
            simple = [r for r in rows if r.protocol == "Simple"]
            big = _largest(simple)
            x = _search(lambda v: _worst(model, big, *rate_to(v), fits), *RATE_RANGE)
            tb, scale = rate_to(x)
        for p in fits:
            mine = [r for r in rows if r.protocol == p]
            _latency_fit(model, mine, tb, scale, fits, p, notes)
            if p != "Simple":
                _protocol_threadblock(model, mine, tb, scale, fits, p, share)
    kind = _ring_kind(topo, found.rings)
    refuse_unphysical({p: f.base_us for p, f in fits.items()},
                      {p: f.hop_latency_us for p, f in fits.items()}, scale, topo.name)
    return Calibration(topo, reference, tb, scale, kind, fits, notes)


#: NCCL's largest base latency per protocol (baseLatencies, Tree and Ring: src/graph/tuning.cc)
NCCL_BASE_US = {"LL": 6.8, "LL128": 14.0, "Simple": 8.4}
#: a fixed cost above this is "far beyond the hop model": four times NCCL's own
FAR_BASE_US = {p: round(4 * v, 1) for p, v in NCCL_BASE_US.items()}
#: a bandwidth above the file's by more than this share is a machine faster than its links
FASTER = 0.02


def refuse_unphysical(bases: dict[str, float], hops: dict[str, float], scale: float,
                      name: str, more: list[str] | None = None) -> None:
    """Raise a LogError naming every fitted parameter no machine has: a negative latency, a
    fixed cost far beyond the hop model (:data:`FAR_BASE_US`), links faster than the file's."""
    why = list(more or [])
    for proto, base in bases.items():
        if base < 0:
            why.append(f"a negative fixed cost for {proto} ({base:.3g} us)")
        elif base > FAR_BASE_US[proto]:
            why.append(f"a {proto} fixed cost of {base:.3g} us, far beyond the hop model "
                       f"(NCCL's own is {NCCL_BASE_US[proto]} us; above {FAR_BASE_US[proto]} "
                       f"is no machine's)")
    why += [f"a negative {p} hop latency ({h:.3g} us)" for p, h in hops.items() if h < 0]
    if scale > 1 + FASTER:
        why.append(f"links {scale:.3g}x faster than the file's ({name!r}); no machine beats "
                   f"its links: check the GPU model, link counts and NICs in the file")
    if why:
        raise LogError(f"calibration refused: the logs would need {'; '.join(why)}. The file "
                       f"does not describe the machine the logs ran on, or the logs are not "
                       f"NCCL's default runs")


def _largest(rows: list[_Row]) -> list[_Row]:
    """The rows where bandwidth shows: sizes of at least 1/16 of the largest (two at least)."""
    top = max(r.size for r in rows)
    big = [r for r in rows if r.size * 16 >= top]
    return big if len(big) >= 2 else sorted(rows, key=lambda r: -r.size)[:2]


def _protocol_threadblock(model: _Model, rows, tb, scale, fits, p: str, share: float) -> None:
    """Give LL / LL128 their own threadblock limit where their rows need one below the
    machine's (it must improve the fit by more than 1%)."""
    big = _largest(rows)
    before = _worst(model, big, tb, scale, fits)
    wire = share * scale if tb is None else min(tb, share * scale)

    def err(x):
        return _worst(model, big, tb, scale, {**fits, p: replace(fits[p], threadblock_GBps=x *
                                                               wire)})
    x = _search(err, RATE_RANGE[0], 1.0)
    if x < 0.98 and err(x) < before - 0.01:
        fits[p] = replace(fits[p], threadblock_GBps=x * wire)
        _latency_fit(model, rows, tb, scale, fits, p, [])


def _ring_kind(topo: Any, rings: list[list[int]]) -> str:
    g = topo.graph
    a, b = rings[0][0], rings[0][1]
    e = g.edges[a, b]
    if e.get("via"):
        return str(g.nodes[e["via"]].get("link") or e.get("kind") or "link")
    return str(e.get("kind") or "link")


def round_trip(cal: Calibration, logs: list[Log], path: str | Path) -> list[RowFit]:
    """Simulate every row of ``logs`` on the written file at ``path`` as the library ran it:
    the baseline as ``msccl-py simulate nccl_ring --topology PATH`` does, and RCCL's MSCCL
    rows as ``allreduce_allpairs``; fills and returns ``cal.rows``."""
    from msccl_py import library
    topo = load(str(path))
    machine = machine_model(topo)
    cal.rows = []
    for log in logs:
        program = PROGRAMS[log.collective]
        msccl = [_msccl(log, row, topo) for row in log.rows]
        ring = [row for row, ms in zip(log.rows, msccl) if ms is None]
        results, picks = simulate_baseline(program, machine, [r.size for r in ring],
                                           topology=str(path), protocol=log.proto)
        by_row = {id(row): (res.time_us, proto, count, program)
                  for row, res, (proto, count) in zip(ring, results, picks)}
        algs: dict = {}
        for row, ms in zip(log.rows, msccl):
            if ms is not None:
                if ms not in algs:
                    algs[ms] = library.compile(ms.program, topo.num_nodes(), inplace=False,
                                               protocol=ms.protocol, instances=ms.instances)
                alg = algs[ms]
                by_row[id(row)] = (simulate(alg, machine, [row.size])[0].time_us, ms.protocol,
                                   ms.instances, ms.program)
            t, proto, count, prog = by_row[id(row)]
            cal.rows.append(RowFit(log.source, row.line, row.size, proto, count, row.time_us,
                                   t, prog))
    return cal.rows


def calibrated_text(cal: Calibration, sources: list[str]) -> str:
    """The machine file of ``cal.topology`` with the fitted statements in its machine block."""
    add = []
    if cal.threadblock_GBps is not None:
        add.append(f"threadblock {_num(cal.threadblock_GBps)} GB/s")
    for f in cal.protocols.values():
        add.append(f"protocol {f.protocol} latency {_num(f.hop_latency_us)} us "
                   f"base {_num(f.base_us)} us")
        if f.threadblock_GBps is not None:
            add.append(f"threadblock {f.protocol} {_num(f.threadblock_GBps)} GB/s")
    scale = (cal.link_kind, cal.beta_scale) if cal.beta_scale != 1.0 else None
    return machine_text(cal.topology, add, describe(cal), sources, scale)


def machine_text(topo: Any, add: list[str], lines: list[str], sources: list[str],
                 scale: tuple[str, float] | None = None) -> str:
    """``topo``'s machine file with the statements ``add`` in its machine block (replacing
    the ones they fit) and ``lines`` saying what was fitted in its header; ``scale`` raises
    one link type's bandwidth."""
    path = Path(topo.source) if topo.source and Path(topo.source).is_file() else find(topo.name)
    text = path.read_text()
    lo, hi = _block(text, topo.machine, path)
    body = text[lo:hi]
    network = any(a.startswith("network kind") for a in add)
    body = "\n".join(_drop_fitted(line, network) for line in body.split("\n"))
    if scale is not None:
        body = _scale_linktype(body, scale[0], scale[1], path)
    body = body.rstrip() + "\n  # calibrated\n" + "".join(f"  {s}\n" for s in add)
    header = [f"# Calibrated by `msccl-py calibrate` from {', '.join(sources)}:"]
    header += [f"#   {line}" for line in lines]
    return "\n".join(header) + "\n#\n" + text[:lo] + body + text[hi:]


def _num(x: float) -> str:
    """Four significant digits, never in exponent form (the file grammar has none)."""
    return np.format_float_positional(float(x), precision=4, unique=False, fractional=False,
                                      trim="-")


def describe(cal: Calibration) -> list[str]:
    """What was fitted, one line each."""
    lines = [f"threadblock {'no limit' if cal.threadblock_GBps is None else f'{cal.threadblock_GBps:.4g} GB/s'}"
             + (f", {cal.link_kind} links x{cal.beta_scale:.3g}" if cal.beta_scale != 1.0
                else f", {cal.link_kind} links as the file has them")]
    for f in cal.protocols.values():
        own = "" if f.threadblock_GBps is None else f", own threadblock {f.threadblock_GBps:.4g} GB/s"
        lines.append(f"{f.protocol}: {f.hop_latency_us:.4g} us per hop, fixed "
                     f"{f.base_us:.4g} us{own}")
    lines += [f"note: {n}" for n in cal.notes]
    return lines


_FITTED = re.compile(r"\b(threadblock(\s+(Simple|LL128|LL))?\s+[\d.]+\s*[GM][Bb]/s"
                     r"|protocol\s+(Simple|LL128|LL)(\s+latency\s+[\d.]+\s*[nmu]s)?"
                     r"(\s+base\s+[\d.]+\s*[nmu]s)?"
                     r"|launch(\s+MSCCL)?\s+[\d.]+\s*[nmu]s(\s+overlapped)?"
                     r"|msccl\s+(Simple|LL128|LL)\s+base\s+[\d.]+\s*[nmu]s"
                     r"|nvls\s+step\s+[\d.]+\s*[nmu]s"
                     r"|bandwidth\s+scale(\s+(Simple|LL128|LL|MSCCL))?\s+[\d.]+)")
_NETWORK = re.compile(r"\bnetwork\s+kind\s+\w+(\s+latency\s+[\d.]+\s*[nmu]s)?")


def _drop_fitted(line: str, network: bool = False) -> str:
    """``line`` without the statements a fit writes (``network kind`` too when ``network``)."""
    code, hash_, comment = line.partition("#")
    code = _FITTED.sub("", code)
    if network:
        code = _NETWORK.sub("", code)
    if not code.strip() and not comment:
        return "" if line.strip() else line
    return code.rstrip() + (f" {hash_}{comment}" if hash_ and code.strip() else hash_ + comment)


def _block(text: str, machine: str, path: Path) -> tuple[int, int]:
    """Start of the body and index of the closing brace of ``machine NAME {...}``."""
    m = re.search(rf"^\s*machine\s+{re.escape(machine)}\b[^{{]*\{{", text, re.M)
    if m is None:
        raise LogError(f"{path} does not define machine {machine!r}")
    depth, i = 1, m.end()
    while i < len(text) and depth:
        ch = text[i]
        if ch == "#":
            i = text.find("\n", i)
            i = len(text) if i < 0 else i
            continue
        depth += ch == "{"
        depth -= ch == "}"
        i += 1
    return m.end(), i - 1


def _scale_linktype(body: str, kind: str, scale: float, path: Path) -> str:
    pattern = re.compile(rf"(\blinktype\s+{re.escape(kind)}\s+)([\d.]+)(\s*[GM][Bb]/s)")
    if not pattern.search(body):
        raise LogError(f"{path} does not define link kind {kind!r} itself (it comes from the "
                       f"machine it extends); calibrate that machine")
    return pattern.sub(lambda m: f"{m.group(1)}{_num(float(m.group(2)) * scale)}{m.group(3)}",
                       body, count=1)


def fit_table(rows: list[RowFit]) -> str:
    """The residual per size, one line per row of a round trip."""
    lines = [f"{'log':<28} {'bytes':>12} {'runs as':<18} {'measured us':>12} "
             f"{'model us':>12} {'error':>7}"]
    for r in rows:
        how = f"{r.protocol} x{r.channels}" + ("" if r.program in PROGRAMS.values() else
                                               f" {r.program.split('_')[-1]}")
        lines.append(f"{Path(r.source).name[:28]:<28} {r.size:>12} {how:<18} "
                     f"{r.measured_us:>12.2f} {r.model_us:>12.2f} {r.error:>+7.1%}")
        if r.noisy:
            lines.append(f"{'':<28} {'':>12} the log allows {r.measured_range[0]:.2f}-"
                         f"{r.measured_range[1]:.2f} us here: "
                         f"{r.settled_error:+.1%} against that")
    return "\n".join(lines)
