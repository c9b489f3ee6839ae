"""Fitting a machine file to nccl-tests / rccl-tests logs as NCCL (RCCL) itself ran them.

Every size of every log is predicted by ``simulate nccl``
(:func:`~msccl_py.tuning.nccl_sim.simulate_nccl`): NCCL's own algorithm
(ring, tree, NVLS, NVLSTree), protocol and channel count for that size, on
the log's node count and with the log's GPUs per process. The fit moves only
what that prediction reads from a machine file, all of it physical:

* ``bandwidth scale X``: the share of NCCL's own bandwidth the machine
  reaches (at most 1: a log faster than the file's links is refused);
* ``bandwidth scale P X``: on top of it, the share protocol P (LL, LL128) of
  NCCL's own algorithms reaches, and ``bandwidth scale MSCCL X`` RCCL's
  built-in MSCCL kernels, each at most 1, from the rows run so whose time is
  mostly bandwidth; a share is of the budget of all channels together;
* ``protocol P base T``: the fixed cost of a call per protocol, and ``msccl P
  base T`` that of RCCL's built-in MSCCL kernels (their own kernel);
* ``launch T``: host time per kernel launch, which a process driving N GPUs
  (nccl-tests ``-g N``, the header's ``nGpus N``) pays N-1 times per call, and
  ``launch MSCCL T`` for RCCL's MSCCL kernels (their own host path), fitted
  apart from the fixed cost: with ``-g N`` logs alone the fixed cost keeps
  its file value and the launch takes the rest. Whether the launches add to
  each call or overlap back-to-back calls (``launch T overlapped``) is
  fitted both ways, the closer kept;
* ``network kind K latency T``: the latency per network step, from logs of
  more than one node.

Rows of 0 bytes are skipped. A fit that needs a parameter no machine has is
refused with the reason (:func:`check_physical`); one that leaves a row
outside its tolerance is refined within those bounds (:func:`_worst_case`).

>>> FAR_LAUNCH_US
38.0
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from msccl_py.errors import LogError
from msccl_py.plan.sizes import format_size
from msccl_py.simulate import machine_model
from msccl_py.topologies import load
from msccl_py.tuning.calibrate import (FAR_BASE_US, RowFit, TOLERANCE, _num, _search,
                                       machine_text, refuse_unphysical)
from msccl_py.tuning.logs import Log
from msccl_py.tuning.minimax import within
from msccl_py.tuning.nccl_sim import simulate_nccl
from msccl_py.tuning.rccl import BASE_LAT as RCCL_BASE_US

#: host time per kernel launch above this is not a launch: ten times the CUDA figure the
#: model starts from (msccl_py.simulate.machine.LAUNCH_US, 3.8 µs)
FAR_LAUNCH_US = 38.0
#: per network step; the slowest published kind (EFA) is 20 µs
FAR_NETWORK_US = 200.0
#: per NVLS pipeline piece: NCCL prices a whole NVLS call's latency at 25 µs (tuning.cc
#: hwLatencies[NVLINK][NVLS][SIMPLE])
FAR_NVLS_STEP_US = 25.0
#: a fitted time per NVLS piece below this (µs) is the fit's noise: NCCL's efficiency stands
NVLS_STEP_SHOWS = 0.1
#: a latency is fitted only from rows where latency is at least this share of the time
SHOWS = 0.25
#: the bandwidth scale is searched between these
SCALE_RANGE = (0.03, 4.0)
#: a share is fitted from the rows whose bandwidth term is at least this share of the time
BW_SHOWS = 0.4
#: the shares fitted: NCCL's LL and LL128 (Simple is the bandwidth scale itself), RCCL's MSCCL
SHARES = ("LL", "LL128", "MSCCL")
#: a share this close to 1 is not written: the search's noise, not the machine
SHARE_NOISE = 0.02
#: the refinement (:func:`_worst_case`) aims every row at this share of its tolerance (room
#: for the written file's rounding), is kept where all are within the second, and moves a
#: fixed cost the logs did not tell (a -g N log's) as reluctantly as the third says
STRICT_TARGET, STRICT_KEPT, STIFF = 0.95, 0.98, 10.0
COLLECTIVES = ("allreduce", "allgather", "reduce_scatter", "broadcast", "reduce")


@dataclass
class NcclFit:
    """The fitted machine: bandwidth scale, fixed cost per protocol, launch time and network
    latency (None: kept from the file), and the rows' residuals (:func:`round_trip`)."""

    topology: Any
    reference: str
    bandwidth_scale: float
    bases: dict[str, float]
    shares: dict[str, float] = field(default_factory=dict)
    launch_us: float | None = None
    network_latency_us: float | None = None
    network_kind: str | None = None
    notes: list[str] = field(default_factory=list)
    #: RCCL's MSCCL kernels: fixed cost per protocol and ``launch`` (µs), where fitted
    msccl: dict[str, float] = field(default_factory=dict)
    #: the launches overlap back-to-back calls (``launch T overlapped``)
    launch_overlapped: bool = False
    #: µs each NVLS pipeline piece pays (``nvls step T``; None: kept from the file)
    nvls_step_us: float | None = None
    rows: list[RowFit] = field(default_factory=list)


@dataclass
class _Run:
    """One log as it is predicted: its rows (sizes > 0), node count and GPUs per process."""

    log: Log
    rows: list
    nodes: int
    gpus_per_process: int


def _runs(logs: list[Log], topo: Any, gpus_per_process: int | None) -> list[_Run]:
    per_node = topo.num_nodes()
    runs = []
    for log in logs:
        log.nranks = log.nranks or per_node
        if log.known_collective() not in COLLECTIVES:
            raise LogError(f"calibration fits {', '.join(COLLECTIVES)} logs, not "
                           f"{log.collective}", log.source)
        if log.algo is not None:
            raise LogError(f"the log was measured with NCCL_ALGO={log.algo}; NCCL's own "
                           f"choice is fitted here (--algo Ring fits ring logs)", log.source)
        if log.nranks % per_node:
            raise LogError(f"the log has {log.nranks} ranks, not a multiple of "
                           f"{topo.name!r}'s {per_node} GPUs", log.source)
        rows = log.timed_rows()
        if not rows:
            raise LogError("the log has no rows above 0 bytes", log.source)
        bad = next((r for r in rows if r.time_us <= 0), None)
        if bad is not None:
            raise LogError(f"size {bad.size} has time {bad.time_us}", log.source, bad.line)
        g = log.gpus_per_process or gpus_per_process or 1
        runs.append(_Run(log, rows, log.nranks // per_node, g))
    return runs


class _Predictor:
    """Times of every row for one guess of the parameters, as ``simulate nccl`` gives them."""

    def __init__(self, reference: str, runs: list[_Run]):
        self.runs = runs
        self.machines = {}
        for n in sorted({r.nodes for r in runs}):
            topo = load(reference, nodes=n if n > 1 else None)
            self.machines[n] = (topo, machine_model(topo))
        self.y = np.concatenate([[r.time_us for r in run.rows] for run in runs])
        self.lo = self.hi = self.y
        self.tol = np.concatenate([[next(t for lo, t in TOLERANCE if r.size >= lo)
                                    for r in run.rows] for run in runs])
        self.big = np.concatenate([_big(run.rows) for run in runs])
        self.picks: list[tuple[str, str, int]] = []

    def machine(self, nodes: int, p: dict):
        _, m = self.machines[nodes]
        protos = {k: replace(v, base_us=p["base"].get(k, v.base_us))
                  for k, v in m.protocols.items()}
        m = replace(m, protocols=protos, launch_us=p["launch"], network_latency_us=p["net"],
                    bw_shares={**m.bw_shares, **p.get("shares", {})}, msccl=dict(p["msccl"]),
                    launch_overlapped=p.get("overlap", m.launch_overlapped),
                    nvls_step_us=p.get("nvls", m.nvls_step_us),
                    resources=[], _paths={}, _res_index={}, _nics_of={})
        return m.with_bandwidth_scale(p["scale"]) if p["scale"] != 1.0 else m

    def times(self, p: dict, mask: np.ndarray | None = None) -> np.ndarray:
        """Predicted µs of every row (of the rows in ``mask`` only, the others 0)."""
        out, picks, k = [], [], 0
        for run in self.runs:
            pick = [True] * len(run.rows) if mask is None else list(mask[k:k + len(run.rows)])
            k += len(run.rows)
            sizes = [r.size for r, keep in zip(run.rows, pick) if keep]
            topo, _ = self.machines[run.nodes]
            res = iter(simulate_nccl(topo, run.log.collective, sizes,
                                     gpus_per_process=run.gpus_per_process,
                                     protocol=run.log.proto, machine=self.machine(run.nodes, p))
                       if sizes else [])
            for keep in pick:
                r = next(res) if keep else None
                out.append(r.time_us if r else 0.0)
                picks.append((r.algorithm, r.protocol, r.channels) if r else None)
        if mask is None:
            self.picks = picks
        return np.array(out)

    def ranges(self) -> list[tuple[float, float]]:
        """Every row's times the log allows (:meth:`Log.time_ranges`) given what runs it
        (the last :meth:`times`' picks, which NCCL's choice alone sets)."""
        out, k = [], 0
        for run in self.runs:
            out += run.log.time_ranges(self.picks[k:k + len(run.rows)])
            k += len(run.rows)
        return out

    def worst(self, p: dict, mask: np.ndarray) -> float:
        got = self.times(p, mask)
        off = np.maximum(np.maximum(self.lo - got, got - self.hi), 0.0)
        return float(np.max(off[mask] / (self.y * self.tol)[mask]))


def _big(rows) -> np.ndarray:
    """Rows where bandwidth shows: sizes of at least 1/16 of the log's largest."""
    top = max(r.size for r in rows)
    return np.array([r.size * 16 >= top for r in rows])


def fit_nccl(logs: list[Log], topology: Any, gpus_per_process: int | None = None,
             strict: bool = True) -> NcclFit:
    """Fit ``topology``'s (a name or path, one machine) bandwidth scale, fixed costs, launch
    time and network latency to ``logs`` as NCCL ran them (module docstring);
    ``gpus_per_process`` stands in for logs whose header does not say it. ``strict``: where
    that fit leaves a row outside its tolerance against its out-of-place time, refine it
    (:func:`_worst_case`)."""
    if not logs:
        raise LogError("no logs to calibrate from")
    reference = str(topology)
    topo = load(reference)
    if (getattr(topo, "num_machines", 1) or 1) > 1:
        raise LogError(f"calibration fits one machine; {topo.name!r} is a cluster")
    runs = _runs(logs, topo, gpus_per_process)
    pred = _Predictor(reference, runs)
    m = pred.machines[min(pred.machines)][1]
    net = max(pred.machines)
    p = {"base": {k: v.base_us for k, v in m.protocols.items()}, "launch": m.launch_us,
         "net": pred.machines[net][1].network_latency_us, "scale": 1.0,
         "msccl": _msccl_start(m), "nvls": m.nvls_step_us}
    notes = [f"{log.source}: {len(log.rows) - len(run.rows)} row(s) of 0 bytes skipped"
             for run, log in ((r, r.log) for r in runs) if len(log.rows) > len(run.rows)]
    pred.times(p)
    # a row the log itself contradicts (timed twice far apart, or too close to the next size
    # run the same way) is fitted to any time the log allows
    pred.lo, pred.hi = (np.array([span[k] for span in pred.ranges()]) for k in (0, 1))
    # the bandwidth scale is NCCL's own algorithms': RCCL's MSCCL kernels among the large
    # rows (a log that stops at 128 MiB has them from 8 MiB) are their share's to fit
    own = np.array([pick[0] != "MSCCL" for pick in pred.picks])
    if (pred.big & own).any():
        pred.big &= own
    free = _free_parameters(runs, pred.picks, notes)
    if ("msccl", "launch") in free:
        p["msccl"].setdefault("launch", p["launch"])
    if ("nvls",) in free and p["nvls"] is None:
        p["nvls"] = 0.0         # NVLS priced per piece from here on (nccl_sim._nccl)
    # a latency is told only by rows whose time it is a real part of: latency-bound rows
    bound = pred.times({**p, "scale": 1e6}) >= SHOWS * pred.times(p)
    names = sorted(free)
    told = {k for k, col in zip(names, _columns(pred, p, names))
            if np.any((col > 0) & bound & free[k])}
    if set(names) - told:
        notes.append("no row is latency-bound for " + ", ".join(
            _label(k) for k in names if k not in told) + ": kept the file's values")
    free = told
    if ("nvls",) not in free:
        p["nvls"] = m.nvls_step_us
    if ("msccl", "launch") not in free and "launch" not in m.msccl:
        p["msccl"].pop("launch", None)        # the MSCCL kernels' launch is the machine's
    p["shares"] = {}
    # a process driving several GPUs either adds its launches to each call or (issuing the
    # next call's launches while the GPUs run this one) hides them behind longer calls: the
    # logs say which, so both are fitted and the closer kept
    launched = {("launch",), ("msccl", "launch")} & free
    every = np.ones(len(pred.y), dtype=bool)

    def fitted(q: dict, free: set) -> dict:
        fits = [_rounds(pred, {**q, "overlap": mode}, free) for mode in
                ((False, True) if launched else (False,))]
        return min(fits, key=lambda f: pred.worst(f, every))
    q = fitted(p, free)
    if ("nvls",) in free and q["nvls"] < NVLS_STEP_SHOWS:
        # the NVLS rows show no time per piece: NCCL's nvlsEfficiency stands, as in the file
        free = free - {("nvls",)}
        notes.append("the NVLS rows show no time per piece: kept NCCL's nvlsEfficiency")
        q = fitted({**p, "nvls": m.nvls_step_us}, free)
    p, moved = _worst_case(pred, q, sorted(free), notes) if strict else (q, set())
    free |= moved
    if p["overlap"]:
        notes.append("the launches overlap back-to-back calls: a call takes the longer of "
                     "the GPUs' time and the process's launches")
    fit = NcclFit(topo, reference, p["scale"],
                  {k: v for k, v in p["base"].items() if ("base", k) in free},
                  {k: v for k, v in p["shares"].items() if v < 1 - SHARE_NOISE},
                  p["launch"] if ("launch",) in free else None,
                  p["net"] if ("net",) in free else None,
                  topo.network_kind, notes,
                  msccl={k: v for k, v in p["msccl"].items() if ("msccl", k) in free},
                  launch_overlapped=p["overlap"],
                  nvls_step_us=p["nvls"] if ("nvls",) in free else None)
    check_physical(fit)
    return fit


def _rounds(pred: _Predictor, p: dict, free: set[tuple]) -> dict:
    """Three rounds of bandwidth scale, latencies and shares from ``p``; the fitted copy."""
    p = {**p, "base": dict(p["base"]), "msccl": dict(p["msccl"]), "shares": {}}
    for _ in range(3):
        p["scale"] = _search(lambda s: pred.worst({**p, "scale": s}, pred.big), *SCALE_RANGE)
        _latency_step(pred, p, free)
        _share_step(pred, p)
        _latency_step(pred, p, free)
    return p


def _worst_case(pred: _Predictor, p: dict, names: list[tuple],
                notes: list[str]) -> tuple[dict, set[tuple]]:
    """Where the fit leaves a row outside its tolerance against its out-of-place time, ``p``
    with scale, shares and latencies moved least to bring every row within, inside
    :func:`check_physical`'s bounds (:func:`within`; else ``p``), and the latencies moved."""
    off = (pred.times(p) - pred.y) / pred.y
    strict, k = np.abs(off) / pred.tol, int(np.argmax(np.abs(off) / pred.tol))
    if strict.max() <= 1.0:
        return p, set()
    # every fixed cost of a protocol some row runs with moves too (stiffly if not told)
    ran = {("msccl" if a == "MSCCL" else "base", proto) for a, proto, _ in pred.picks}
    keys = [("scale",)] + [("shares", k) for k in p["shares"]] + sorted(set(names) | ran)
    far = {"launch": FAR_LAUNCH_US, "net": FAR_NETWORK_US, "nvls": FAR_NVLS_STEP_US,
           **{("base", q): b for q, b in FAR_BASE_US.items()},
           **{("msccl", q): 4 * RCCL_BASE_US[k] for k, q in enumerate(("LL", "LL128", "Simple"))},
           ("msccl", "launch"): FAR_LAUNCH_US}
    ratio = np.array([k[0] in ("scale", "shares") for k in keys])
    hi = np.array([1.0 if r else far[k if len(k) == 2 else k[0]] for k, r in zip(keys, ratio)])

    def at(x: np.ndarray) -> dict:
        q = {**p, "base": dict(p["base"]), "msccl": dict(p["msccl"]), "shares": dict(p["shares"])}
        for k, v in zip(keys, x):
            _set(q, k, float(v))
        return q
    x0 = np.array([_value(p, k) for k in keys])
    x, after = within(lambda x: (pred.times(at(x)) - pred.y) / (pred.y * pred.tol), x0,
                      np.where(ratio, SCALE_RANGE[0], 0.0), hi, ratio, STRICT_TARGET, STRICT_KEPT,
                      np.array([STIFF if k in ran - set(names) else 1.0 for k in keys]))
    log, size = [(run.log.source, r.size) for run in pred.runs for r in run.rows][k]
    said = (f"the fit left {format_size(size)} of {Path(log).name} {off[k]:+.1%} off its "
            f"out-of-place time ({pred.tol[k]:.0%} allowed); ")
    if x is None:
        notes.append(said + f"no physical parameters bring every row within (at best "
                     f"{after:.2f} of its bound)")
        pred.times(p)
        return p, set()
    moved = [k for k, v, v0 in zip(keys, x, x0) if abs(v - v0) > 1e-2 * max(abs(v0), 1.0)]
    notes.append(said + f"refined by the least change that brings every row within "
                 f"{after:.2f} of its bound, moving " + ", ".join(_label(k) for k in moved))
    q = at(x)
    pred.times(q)
    return q, {k for k in moved if k[0] not in ("scale", "shares")}


def _free_parameters(runs: list[_Run], picks: list, notes: list[str]) -> dict[tuple, np.ndarray]:
    """What the logs can tell apart, and the rows that tell it: a protocol's fixed cost from
    rows NCCL runs with it in logs of one process per GPU on one node, the launch from logs
    of several GPUs per process, the network latency from logs across nodes. A fixed cost no
    such log shows keeps the file's value; the launch and network latency take the rest."""
    kinds = []
    for run in runs:
        kinds += [(run.gpus_per_process == 1 and run.nodes == 1, run.gpus_per_process > 1,
                   run.nodes > 1)] * len(run.rows)
    per_gpu, several, nodes = (np.array(col, dtype=bool) for col in zip(*kinds))
    msccl = np.array([pick[0] == "MSCCL" for pick in picks])
    free: dict[tuple, np.ndarray] = {}
    for proto in ("LL", "LL128", "Simple"):
        for key, mask in ((("base", proto), per_gpu & ~msccl), (("msccl", proto), per_gpu & msccl)):
            mask = mask & np.array([pick[1] == proto for pick in picks])
            if mask.any():
                free[key] = mask
    # RCCL's MSCCL kernels are launched by their own host path (mscclSetupKernel fills a work
    # FIFO entry per threadblock first), so a -g N log times their launch apart
    for key, mask in ((("launch",), several & ~msccl), (("msccl", "launch"), several & msccl)):
        if mask.any():
            free[key] = mask
    if nodes.any():
        free["net",] = nodes
    # NVLS's pieces each pay a fixed time NCCL's formula lacks (the switch's reduce and
    # multicast synchronise per piece): told by the rows NCCL runs with NVLS, any launch
    nvls = np.array([pick[0].startswith("NVLS") for pick in picks])
    if nvls.any():
        free["nvls",] = nvls
    if not per_gpu.any():
        rest = " and ".join(n for k, n in ((("launch",), "the launch time"),
                                           (("net",), "the network latency")) if k in free)
        notes.append(f"no log runs one process per GPU on one node: the fixed costs keep the "
                     f"file's values and {rest} take{'s' if ' and ' not in rest else ''} the rest")
    return free


def _share_step(pred: _Predictor, p: dict) -> None:
    """Each share (:data:`SHARES`) by a minimax search over the rows run with it whose time
    is mostly bandwidth (its term at least :data:`BW_SHOWS` of the time), at most 1: a
    protocol cannot beat the budget NCCL gives it."""
    at = pred.times(p)
    picks = list(pred.picks)
    lat = pred.times({**p, "scale": 1e6})
    shows = at - lat >= BW_SHOWS * at
    for key in SHARES:
        mask = shows & np.array([pick is not None and (pick[0] == "MSCCL" if key == "MSCCL"
                                                       else pick[0] != "MSCCL" and
                                                       pick[1] == key) for pick in picks])
        mask &= ~pred.big
        if not mask.any():
            continue
        p["shares"][key] = _search(
            lambda x: pred.worst({**p, "shares": {**p["shares"], key: x}}, mask),
            SCALE_RANGE[0], 1.0)
    pred.times(p)


def _latency_step(pred: _Predictor, p: dict, free: set[tuple]) -> None:
    """The latencies by least squares in relative error (each row over its tolerance): time
    is linear in each of them, so one finite difference per parameter gives its column.
    Unconstrained, so a log that needs a negative latency shows it (and is refused)."""
    names = sorted(free)
    if not names:
        return
    at = pred.times(p)
    a = np.stack(_columns(pred, p, names, at), axis=1)
    now = np.array([_value(p, k) for k in names])
    # what the free latencies must explain (a noisy row: up to the nearer of its times)
    rest = np.clip(at, pred.lo, pred.hi) - (at - a @ now)
    w = pred.y * pred.tol
    keep = np.abs(a).sum(axis=0) > 1e-9
    x = now.copy()
    x[keep] = np.linalg.lstsq(a[:, keep] / w[:, None], rest / w, rcond=None)[0]
    x[np.abs(x) < 1e-6] = 0.0                # round-off of an exact zero
    for k, v in zip(names, x):
        _set(p, k, float(v))
    pred.times(p)


def _value(p: dict, key: tuple) -> float:
    return p[key[0]][key[1]] if len(key) == 2 else p[key[0]]


def _set(p: dict, key: tuple, v: float) -> None:
    if len(key) == 2:
        p[key[0]] = {**p[key[0]], key[1]: v}
    else:
        p[key[0]] = v


def _label(key: tuple) -> str:
    return {"base": key[-1], "msccl": f"MSCCL {key[-1]}", "nvls": "the NVLS step",
            "shares": f"the {key[-1]} share", "scale": "the bandwidth scale"}.get(key[0], key[0])


def _msccl_start(m) -> dict[str, float]:
    """RCCL's MSCCL kernels' figures in ``m``: its fixed cost per protocol (RCCL's base
    latency unless the file says) and its launch where the file gives one (else they are
    launched in the machine's time)."""
    out = {p: m.msccl.get(p, RCCL_BASE_US[k]) for k, p in enumerate(("LL", "LL128", "Simple"))}
    if "launch" in m.msccl:
        out["launch"] = m.msccl["launch"]
    return out


def _columns(pred: _Predictor, p: dict, names: list[tuple],
             at: np.ndarray | None = None) -> list[np.ndarray]:
    """Per parameter, how much 1 µs more of it lengthens every row."""
    at = pred.times(p) if at is None else at
    cols = []
    for k in names:
        q = dict(p)
        _set(q, k, _value(p, k) + 1.0)
        cols.append(pred.times(q) - at)
    pred.times(p)
    return cols


def check_physical(fit: NcclFit) -> None:
    """Refuse a fit with a parameter no machine has, saying which and why
    (:func:`~msccl_py.tuning.calibrate.refuse_unphysical`, and a launch or network latency
    outside what hardware shows)."""
    more = []
    if fit.launch_us is not None and not 0 <= fit.launch_us <= FAR_LAUNCH_US:
        more.append(f"a kernel launch of {fit.launch_us:.3g} us (CUDA's is about 3.8 us; "
                    f"0 to {FAR_LAUNCH_US:g} is physical)")
    launch = fit.msccl.get("launch")
    if launch is not None and not 0 <= launch <= FAR_LAUNCH_US:
        more.append(f"a launch of RCCL's MSCCL kernels of {launch:.3g} us (0 to "
                    f"{FAR_LAUNCH_US:g} is physical)")
    for k, proto in enumerate(("LL", "LL128", "Simple")):
        base = fit.msccl.get(proto)
        if base is not None and not 0 <= base <= 4 * RCCL_BASE_US[k]:
            more.append(f"a fixed cost of {base:.3g} us for RCCL's MSCCL {proto} kernels "
                        f"(RCCL's own is {RCCL_BASE_US[k]:g} us; 0 to {4 * RCCL_BASE_US[k]:g} "
                        f"is physical)")
    if fit.nvls_step_us is not None and not 0 <= fit.nvls_step_us <= FAR_NVLS_STEP_US:
        more.append(f"an NVLS step of {fit.nvls_step_us:.3g} us per piece (0 to "
                    f"{FAR_NVLS_STEP_US:g}, NCCL's latency for a whole NVLS call, is physical)")
    if fit.network_latency_us is not None and not 0 <= fit.network_latency_us <= FAR_NETWORK_US:
        more.append(f"a network latency of {fit.network_latency_us:.3g} us per step (0 to "
                    f"{FAR_NETWORK_US:g} is physical)")
    refuse_unphysical(fit.bases, {}, fit.bandwidth_scale, fit.topology.name, more)


def predict(fit: NcclFit, logs: list[Log], gpus_per_process: int | None = None) -> list[RowFit]:
    """Every usable row of ``logs`` as the fitted machine (in memory) predicts it."""
    runs = _runs(logs, fit.topology, gpus_per_process)
    pred = _Predictor(fit.reference, runs)
    m = pred.machines[min(pred.machines)][1]
    p = {"base": {k: fit.bases.get(k, v.base_us) for k, v in m.protocols.items()},
         "launch": m.launch_us if fit.launch_us is None else fit.launch_us,
         "net": (pred.machines[max(pred.machines)][1].network_latency_us
                 if fit.network_latency_us is None else fit.network_latency_us),
         "scale": fit.bandwidth_scale, "shares": dict(fit.shares),
         "msccl": {**_msccl_start(m), **fit.msccl},
         "overlap": fit.launch_overlapped or m.launch_overlapped,
         "nvls": m.nvls_step_us if fit.nvls_step_us is None else fit.nvls_step_us}
    got = pred.times(p)
    spans = pred.ranges()
    out, k = [], 0
    for run in runs:
        for row in run.rows:
            algo, proto, ch = pred.picks[k]
            out.append(RowFit(run.log.source, row.line, row.size, proto, ch, row.time_us,
                              float(got[k]), algo, spans[k]))
            k += 1
    return out


def round_trip(fit: NcclFit, logs: list[Log], path: str | Path,
               gpus_per_process: int | None = None) -> list[RowFit]:
    """Every row of ``logs`` simulated with ``simulate nccl`` on the written file at ``path``
    (nothing from memory); fills and returns ``fit.rows``."""
    written = NcclFit(load(str(path)), str(path), 1.0, {})
    fit.rows = predict(written, logs, gpus_per_process)
    return fit.rows


def calibrated_text(fit: NcclFit, sources: list[str]) -> str:
    """The machine file of ``fit.topology`` with the fitted statements in its machine block
    (its GPU model, switches, NICs and network kind kept, so NVLS and the network stay)."""
    m = machine_model(fit.topology)
    add = []
    if abs(fit.bandwidth_scale - 1.0) > 1e-4:
        add.append(f"bandwidth scale {_num(min(fit.bandwidth_scale, 1.0))}")
    for key, share in fit.shares.items():
        add.append(f"bandwidth scale {key} {_num(share)}")
    for proto, base in fit.bases.items():
        add.append(f"protocol {proto} latency {_num(m.protocol(proto).hop_latency_us)} us "
                   f"base {_num(max(base, 0.0))} us")
    if fit.launch_us is not None or fit.launch_overlapped:
        launch = machine_model(fit.topology).launch_us if fit.launch_us is None else fit.launch_us
        add.append(f"launch {_num(launch)} us" + (" overlapped" if fit.launch_overlapped else ""))
    for key, us in fit.msccl.items():
        add.append(f"launch MSCCL {_num(us)} us" if key == "launch" else
                   f"msccl {key} base {_num(max(us, 0.0))} us")
    if fit.nvls_step_us is not None:
        add.append(f"nvls step {_num(max(fit.nvls_step_us, 0.0))} us")
    if fit.network_latency_us is not None:
        add.append(f"network kind {fit.network_kind or 'ib'} latency "
                   f"{_num(fit.network_latency_us)} us")
    return machine_text(fit.topology, add, describe(fit), sources)


def describe(fit: NcclFit) -> list[str]:
    """What was fitted, one line each."""
    lines = [f"bandwidth: {fit.bandwidth_scale:.3f} of NCCL's own for this machine"]
    lines += [f"{k}: {x:.3f} of that bandwidth" + (" (RCCL's MSCCL kernels)" if k == "MSCCL"
                                                    else "") for k, x in fit.shares.items()]
    lines += [f"{p}: fixed {b:.4g} us per call" for p, b in fit.bases.items()]
    if fit.launch_us is not None:
        lines.append(f"launch: {fit.launch_us:.3g} us per kernel (-g N adds " +
                     ("N of them, hidden behind longer calls)" if fit.launch_overlapped
                      else "N-1 of them)"))
    lines += [f"RCCL's MSCCL kernels: launch {us:.3g} us" if key == "launch" else
              f"RCCL's MSCCL {key} kernels: fixed {us:.4g} us per call"
              for key, us in fit.msccl.items()]
    if fit.nvls_step_us is not None:
        lines.append(f"NVLS: {fit.nvls_step_us:.3g} us per pipeline piece, in place of "
                     f"NCCL's nvlsEfficiency (its bytes at the bandwidth above)")
    if fit.network_latency_us is not None:
        lines.append(f"network ({fit.network_kind or 'ib'}): {fit.network_latency_us:.3g} us "
                     f"per step")
    return lines + [f"note: {n}" for n in fit.notes]


def cross_validate(logs: list[Log], topology: Any, gpus_per_process: int | None = None,
                   strict: bool = True) -> list[tuple[str, str, dict]]:
    """Fit on each log alone and predict every other: (fitted on, predicted, stats) where
    stats are the median and worst |error| at 64 KiB and up and below (None: no rows)."""
    out = []
    for i, log in enumerate(logs):
        try:
            fit = fit_nccl([log], topology, gpus_per_process, strict)
        except LogError as exc:
            out.append((log.source, "-", {"refused": exc.message}))
            continue
        for j, other in enumerate(logs):
            if i != j:
                rows = predict(fit, [other], gpus_per_process)
                out.append((log.source, other.source, error_stats(rows)))
    return out


def error_stats(rows: list[RowFit], settled: bool = False) -> dict:
    """Median and worst |error| of ``rows`` at 64 KiB and up (``big``) and below (``small``)
    against their out-of-place times, or (``settled``) against the nearest time the log itself
    allows (:attr:`~msccl_py.tuning.calibrate.RowFit.settled_error`)."""
    stats = {}
    for key, pick in (("big", lambda r: r.size >= 1 << 16), ("small", lambda r: r.size < 1 << 16)):
        e = sorted(abs(r.settled_error if settled else r.error) for r in rows if pick(r))
        stats[key] = (float(np.median(e)), e[-1]) if e else None
    return stats
