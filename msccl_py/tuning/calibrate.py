"""Fitting a machine's α and β to nccl-tests / rccl-tests logs of NCCL's ring.

NCCL's own cost model (``tuning.cc``) predicts a collective's time as a
fixed latency, a latency per ring step and the bytes over a bus bandwidth.
A ring run of ``n`` ranks takes ``hops`` steps (2(n-1) for allreduce, n-1
for allgather and reduce-scatter) and its busbw, nccl-tests' figure, is the
bandwidth every ring link carries. So, per protocol ``p``::

    time(S) = base_p + hops · α_p + S · busfactor / (share · β · e_p)

with ``share`` the link units the machine's NCCL rings use together
(:func:`~msccl_py.tuning.rings.ring_share`: 12 on DGX A100, 7 on MI300X),
``β`` the bandwidth of one link unit and ``e_p`` the protocol's efficiency
(Simple 1). The fit is linear least squares in relative error over every row
of every log; ``base`` is kept only when the logs have more than one hop
count (different collectives or rank counts), else it folds into α. LL and
LL128 logs give their own ``e_p`` against a Simple log; without one the
nominal 1/2 and 120/128 are assumed.

>>> from msccl_py.tuning.logs import Log, Row
>>> rows = [Row(s, 8 + 14 * 0.5 + s * 1.75 / (7 * 50e3), 0, 0) for s in (1 << 10, 1 << 20, 1 << 30)]
>>> fit = fit_logs([Log("x", "allreduce", 8, "Ring", "Simple", rows)], "mi300x")
>>> round(fit.beta_GBps, 3), round(fit.alpha_us, 3)
(50.0, 1.071)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from msccl_py.errors import LogError
from msccl_py.topologies import load
from msccl_py.topologies.library import find
from msccl_py.tuning.logs import Log, bus_factor
from msccl_py.tuning.rings import find_rings, ring_share

#: bandwidth efficiency assumed for a protocol no Simple log calibrates
NOMINAL_EFFICIENCY = {"Simple": 1.0, "LL128": 120 / 128, "LL": 0.5}


@dataclass(frozen=True)
class Point:
    """One fitted row: where it came from, its size, measured and modelled time (µs)."""

    source: str
    line: int
    size: int
    measured_us: float
    model_us: float

    @property
    def error(self) -> float:
        """(model - measured) / measured."""
        return (self.model_us - self.measured_us) / self.measured_us


@dataclass
class ProtocolFit:
    """The fitted parameters of one protocol and the rows they were fitted to."""

    protocol: str
    alpha_us: float
    base_us: float
    bus_GBps: float
    efficiency: float
    points: list[Point] = field(default_factory=list)


@dataclass
class Calibration:
    """α (µs per hop) and β (GB/s per link unit) of a machine's ring link kind, with per-protocol fits."""

    topology: Any
    kind: str
    share: float
    alpha_us: float
    beta_GBps: float
    protocols: dict[str, ProtocolFit]
    notes: list[str] = field(default_factory=list)


def ring_hops(collective: str, nranks: int) -> int:
    """Sequential steps of NCCL's ring for ``collective``.

    >>> ring_hops("allreduce", 8), ring_hops("allgather", 8)
    (14, 7)
    """
    if collective == "allreduce":
        return 2 * (nranks - 1)
    if collective in ("allgather", "reduce_scatter"):
        return nranks - 1
    raise LogError(f"calibration fits ring allreduce, allgather and reduce_scatter logs, "
                   f"not {collective}")


def _solve(columns: dict[str, np.ndarray], times: np.ndarray) -> dict[str, float]:
    """Non-negative least squares in relative error, by dropping negative coefficients."""
    names = list(columns)
    while True:
        a = np.stack([columns[k] / times for k in names], axis=1)
        coef, *_ = np.linalg.lstsq(a, np.ones_like(times), rcond=None)
        negative = [k for k, c in zip(names, coef) if c < 0 and k != "x"]
        if not negative:
            return dict(zip(names, coef))
        names.remove(negative[0])


def _prepare(logs: list[Log], topology: Any, protocol: str | None, algo: str | None) -> None:
    n = topology.num_nodes()
    for log in logs:
        log.algo = log.algo or algo or "Ring"
        log.proto = log.proto or protocol or "Simple"
        log.nranks = log.nranks or n
        if log.algo != "Ring":
            raise LogError(f"the log was measured with NCCL_ALGO={log.algo}; calibration fits "
                           f"ring runs (NCCL_ALGO=Ring)", log.source)
        if log.collective is None:
            raise LogError("the log does not say its collective (no banner, command line or "
                           "file name); give it with --collective", log.source)
        if log.nranks != n:
            raise LogError(f"the log has {log.nranks} ranks, topology {topology.name!r} "
                           f"{n}", log.source)


def fit_logs(logs: list[Log], topology: Any, protocol: str | None = None,
             algo: str | None = None) -> Calibration:
    """Fit α, β and per-protocol parameters of ``topology`` (a Topology or its name) to ``logs``.

    ``protocol``/``algo`` stand in for logs that do not say their
    NCCL_PROTO/NCCL_ALGO (defaults: Simple, Ring).
    """
    topo = load(topology) if isinstance(topology, (str, Path)) else topology
    if not logs:
        raise LogError("no logs to calibrate from")
    _prepare(logs, topo, protocol, algo)
    rings = find_rings(topo)
    share = ring_share(topo, rings)
    kind = topo.graph.edges[rings[0][0], rings[0][1]].get("kind") or "link"
    fits: dict[str, ProtocolFit] = {}
    notes: list[str] = []
    for proto in sorted({log.proto for log in logs}, key=list(NOMINAL_EFFICIENCY).index):
        rows = [(log, row) for log in logs if log.proto == proto for row in log.rows]
        times = np.array([row.time_us for _, row in rows], dtype=float)
        if (times <= 0).any():
            bad = next((log, row) for log, row in rows if row.time_us <= 0)
            raise LogError(f"size {bad[1].size} has time {bad[1].time_us}", bad[0].source,
                           bad[1].line)
        hops = np.array([ring_hops(log.collective, log.nranks) for log, _ in rows], float)
        x = np.array([row.size * bus_factor(log.collective, log.nranks) / (share * 1e3)
                      for log, row in rows])
        columns = {"hops": hops, "x": x}
        if len(set(hops)) > 1:
            columns["base"] = np.ones_like(times)
        elif proto == "Simple":
            notes.append(f"{proto}: one hop count ({int(hops[0])}) in the logs, so the fixed "
                         f"latency is folded into α")
        coef = _solve(columns, times)
        if coef["x"] <= 0:
            raise LogError(f"the {proto} logs do not grow with size; no bandwidth to fit",
                           rows[0][0].source)
        model = sum(coef[k] * columns[k] for k in coef)
        points = [Point(log.source, row.line, row.size, row.time_us, float(m))
                  for (log, row), m in zip(rows, model)]
        fits[proto] = ProtocolFit(proto, float(coef.get("hops", 0.0)),
                                  float(coef.get("base", 0.0)), float(share / coef["x"]), 1.0, points)
    if "Simple" in fits:
        beta = fits["Simple"].bus_GBps / share
    else:
        first = next(iter(fits.values()))
        beta = first.bus_GBps / share / NOMINAL_EFFICIENCY[first.protocol]
        notes.append(f"no Simple log: β assumes {first.protocol} runs at "
                     f"{NOMINAL_EFFICIENCY[first.protocol]:.3g} of the link")
    for fit in fits.values():
        fit.efficiency = fit.bus_GBps / (share * beta)
    alpha = fits["Simple"].alpha_us if "Simple" in fits else next(iter(fits.values())).alpha_us
    return Calibration(topo, kind, share, alpha, beta, fits, notes)


def predict_us(calibration: Calibration, collective: str, nranks: int, size: int,
               protocol: str = "Simple") -> float:
    """The fitted model's time (µs) for one ring call.

    >>> from msccl_py.tuning.logs import Log, Row
    >>> rows = [Row(s, 14 * 1.0 + s * 1.75 / (7 * 50e3), 0, 0) for s in (1 << 10, 1 << 30)]
    >>> cal = fit_logs([Log("x", "allreduce", 8, "Ring", "Simple", rows)], "mi300x")
    >>> round(predict_us(cal, "allreduce", 8, 1 << 20), 2)
    19.24
    """
    fit = calibration.protocols.get(protocol)
    if fit is None:
        raise LogError(f"no {protocol} logs were calibrated (have: "
                       f"{', '.join(calibration.protocols)})")
    return float(fit.base_us + ring_hops(collective, nranks) * fit.alpha_us
                 + size * bus_factor(collective, nranks) / (fit.bus_GBps * 1e3))


def calibrated_text(calibration: Calibration, sources: list[str]) -> str:
    """The machine file of ``calibration.topology`` with the ring link kind's β and α replaced."""
    topo = calibration.topology
    path = find(topo.name)
    text = path.read_text()
    pattern = re.compile(rf"^(\s*linktype\s+{re.escape(calibration.kind)})\b[^\n#]*", re.M)
    if not pattern.search(text):
        raise LogError(f"{path} does not define link kind {calibration.kind!r} itself "
                       f"(it comes from the machine it extends); calibrate that machine")
    new = pattern.sub(lambda m: f"{m.group(1)} {calibration.beta_GBps:.4g} GB/s latency "
                                f"{calibration.alpha_us:.4g} us", text, count=1)
    header = [f"# Calibrated by `msccl-py calibrate` from {', '.join(sources)}:",
              f"#   {calibration.kind}: beta {calibration.beta_GBps:.4g} GB/s per link, "
              f"alpha {calibration.alpha_us:.4g} us per hop "
              f"({calibration.share:g} link units per GPU carry NCCL's rings)"]
    for fit in calibration.protocols.values():
        header.append(f"#   {fit.protocol}: efficiency {fit.efficiency:.3f}, alpha "
                      f"{fit.alpha_us:.4g} us per hop, fixed {fit.base_us:.4g} us")
    header += [f"#   note: {note}" for note in calibration.notes]
    return "\n".join(header) + "\n#\n" + new


def fit_table(calibration: Calibration) -> str:
    """Per-size fit error, one line per fitted row."""
    lines = [f"{'log':<32} {'proto':<6} {'bytes':>12} {'measured us':>12} {'model us':>12} "
             f"{'error':>7}"]
    for fit in calibration.protocols.values():
        for p in fit.points:
            lines.append(f"{Path(p.source).name[:32]:<32} {fit.protocol:<6} {p.size:>12} "
                         f"{p.measured_us:>12.2f} {p.model_us:>12.2f} {p.error:>+7.1%}")
    return "\n".join(lines)
