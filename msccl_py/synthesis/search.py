"""Synthesis: candidate schedules for a machine, built as programs, the fastest kept.

For bandwidth the candidates are tree packings (:mod:`~msccl_py.synthesis.packing`)
and ring packings (:mod:`~msccl_py.synthesis.rings`), each rounded to a few
chunk counts (:mod:`~msccl_py.synthesis.integral`) and laid out on channels
(:mod:`~msccl_py.synthesis.schedule`); on clusters the allreduce composed of the machine's
packing and a ring per rail (:mod:`~msccl_py.synthesis.compose`) is timed first and,
near the bound or past 64 ranks, alone. For latency they are few-step
schedules (:mod:`~msccl_py.synthesis.latency`). Every candidate is written as
an MSCCLang program (:mod:`~msccl_py.synthesis.schedule_program`), compiled, and timed
by the performance model at the size the objective names; the fastest that
fits the XML target's limits wins. Its program then goes through the
verifier like any other (``Synthesis.xml``).

>>> s = synthesize("mi300x", "allgather")
>>> s.chosen.label, round(s.algbw_GBps / s.bound.algbw_GBps, 3)
('trees c=1', 0.994)
"""

from __future__ import annotations

import math
import os
import time as _time
from dataclasses import dataclass, field

from msccl_py import ir
from msccl_py.errors import LimitError, MscclError
from msccl_py.synthesis.bound import Bound, bound
from msccl_py.synthesis.compose import composed_plan, composed_source
from msccl_py.synthesis.candidates import (DEEP_COUNTS, KINDS, alltoall_schedules,
                                           bandwidth_schedules, latency_schedules,
                                           path_schedules)
from msccl_py.synthesis.hops import Hops, hops
from msccl_py.synthesis.schedule import Schedule
from msccl_py.synthesis.schedule_program import build, program_source

#: the collectives synthesis writes
COLLECTIVES = ("allgather", "reduce_scatter", "allreduce", "alltoall")
#: the size each named objective is judged at
OBJECTIVE_BYTES = {"bandwidth": 1 << 30, "latency": 1 << 10}
#: instances tried for the best candidates (each a copy of the schedule on channels of its own)
INSTANCES = (1, 2, 4)
#: a candidate this close to the bound ends the search
GOOD_ENOUGH = 0.999
#: below this share of the bound, path packings and trees in more chunks are tried too
PATHS_BELOW = 0.95
#: a candidate whose chunk count MSCCL's size rule refuses at the objective's size must be
#: this much faster to win over one it runs (MSCCL hands such a call to NCCL), unless the
#: one it runs is slower than the best ring packing (what NCCL's rings would do instead)
RUNNABLE_SLACK = 1.02
#: CPU seconds after which no further candidate is built (large clusters compile slowly)
SOLVE_BUDGET_S = 40.0
#: a composed cluster allreduce this close to the bound ends the search
COMPOSED_ENOUGH = 0.9
#: ranks above which clusters get the composed allreduce only (rail trees over every rank
#: take minutes to build there)
RAIL_TREES_UP_TO = 64


@dataclass
class Candidate:
    """One schedule tried: what it is, its program text and predicted time."""

    label: str
    schedule: Schedule
    source: str
    summary: list[str] = field(default_factory=list)
    name: str = "synthesized"
    algorithm: ir.Algorithm | None = None
    time_us: float = math.inf
    refused: str | None = None
    protocol: str = "Simple"
    instances: int = 1
    hint: int = 1   # instances the lanes were counted for
    floor_per_byte: float = 0.0   # µs per byte of the call its packing's busiest resource takes
    program: object = field(default=None, repr=False)   # the MSCCLProgram timed
    composed: bool = False   # a cluster composed of machine and rail schedules (``compose``)


@dataclass
class Synthesis:
    """The chosen schedule, its program and figures (see :func:`synthesize`)."""

    collective: str
    machine: str
    nbytes: int
    chosen: Candidate
    candidates: list[Candidate]
    bound: Bound | None
    solve_s: float
    topology_ref: str = ""
    nodes: int | None = None
    model: object = field(default=None, repr=False)   # the performance model's Machine
    _xml: dict = field(default_factory=dict, repr=False)   # verified XML per target

    @property
    def source(self) -> str:
        """The chosen schedule as an MSCCLang program, defaults set to what won."""
        c = self.chosen
        lines = c.summary + [self._prediction()]
        if c.composed:
            return composed_source(c.schedule, c.name, self.topology_ref, self.nodes, lines,
                                   c.protocol, c.instances)
        c.schedule.protocol = c.protocol
        return program_source(c.schedule, c.name, self.topology_ref, self.nodes, lines,
                              c.instances)

    @property
    def algorithm(self) -> ir.Algorithm:
        return self.chosen.algorithm

    @property
    def predicted(self):
        """The performance model's :class:`~msccl_py.simulate.Result` at :attr:`nbytes`."""
        from msccl_py.simulate import simulate
        return simulate(self.algorithm, self.model, self.nbytes)[0]

    def program(self, **kwargs):
        """A fresh ``MSCCLProgram`` of the chosen schedule (its defaults: what won)."""
        return build(self.source, f"<synthesized {self.collective}>", **kwargs)

    def xml(self, target: str | None = None) -> str:
        """The verified MSCCL XML of the chosen schedule (as ``XML()`` writes it); verified
        once per target (a cluster's takes seconds)."""
        if target not in self._xml:
            prog = self.chosen.program or self.program()   # the one timed: already lowered
            with prog:
                self._xml[target] = prog.generate_xml(target)
        return self._xml[target]

    @property
    def algbw_GBps(self) -> float:
        """The chosen schedule's algbw at :attr:`nbytes` as synthesis judged it (the model's
        time, never below its busiest resource's bytes / bandwidth)."""
        return self.nbytes / (self.chosen.time_us * 1e3)

    def _prediction(self) -> str:
        from msccl_py.plan.sizes import format_size
        c = self.chosen
        line = (f"Predicted by the performance model at {format_size(self.nbytes)}: "
                f"{self.algbw_GBps:.2f} GB/s algbw ({c.protocol}, "
                f"{c.instances} instance{'s' if c.instances > 1 else ''})")
        if self.bound is not None:
            line += f", {self.algbw_GBps / self.bound.algbw_GBps:.1%} of the bound"
        return line + "."


def synthesize(topology, collective: str, *, nodes: int | None = None,
               objective: str | int = "bandwidth", target: str = "msccl-executor",
               topology_ref: str | None = None, budget_s: float = SOLVE_BUDGET_S,
               nccl_time=None) -> Synthesis:
    """The fastest schedule found for ``collective`` on ``topology``.

    ``objective``: ``"bandwidth"`` (judged at 1 GiB), ``"latency"`` (1 KiB)
    or a size in bytes. ``target`` is the XML dialect whose limits the
    program must fit. ``topology_ref`` is what the program's ``load()``
    names (default: the machine's name or file). Past ``budget_s`` seconds
    of CPU time (this process's, so that the schedule chosen does not depend
    on what else the machine runs) no further candidate is tried (the best so far
    is kept). ``nccl_time(nbytes)`` is the time (µs) of what NCCL itself runs for a call
    MSCCL refuses (``simulate nccl``, which sits above synthesis: its callers pass it);
    without it, NCCL's ring.
    """
    from msccl_py.simulate import machine_model
    from msccl_py.topologies import load, resolve
    if collective not in COLLECTIVES:
        raise MscclError(f"cannot synthesize {collective!r}; synthesis writes "
                         f"{', '.join(COLLECTIVES)}")
    start, cpu = _time.monotonic(), _time.process_time()
    topo = load(topology, nodes=nodes) if nodes else resolve(topology)
    nbytes = _objective_bytes(objective)
    ref = topology_ref or _reference(topology, topo)
    machine = machine_model(topo)
    b = bound(topo, collective) if collective in KINDS else None
    cands = _composed(topo, collective, objective, b, ref, nodes, machine, nbytes, target)
    # a cluster composed near the bound (or too large to pack rail trees over) needs nothing more
    composed_only = bool(cands) and (topo.num_nodes() > RAIL_TREES_UP_TO or any(
        c.time_us * COMPOSED_ENOUGH <= b.time_us(nbytes) for c in cands))
    h = None if composed_only else hops(topo)
    if not composed_only and (objective != "latency" or collective not in KINDS):
        cands += _bandwidth_candidates(h, topo, collective, b, topo.name, ref, nodes)
    if not composed_only and objective != "bandwidth" and collective in KINDS:
        cands += [_candidate(label, s, packed, b, topo.name, ref, nodes, hint)
                  for label, s, packed, hint in latency_schedules(h, collective)]
        routed = hops(topo, nodes, routed=True) if topo.num_machines == 1 else h
        if len(routed.src) > len(h.src):   # unlinked pairs: one routed send, not two steps
            cands += [_candidate(f"{label}, routed", s, packed, b, topo.name, ref, nodes, hint)
                      for label, s, packed, hint in latency_schedules(routed, collective, True)]
    if not cands:
        raise MscclError(f"no {collective} schedule found on '{topo.name}'")
    good = None if b is None else b.time_us(nbytes) / GOOD_ENOUGH

    def rank(c: Candidate) -> float:
        """Its time, or more where MSCCL would not run it at the objective's size."""
        if c.algorithm is None:
            return math.inf
        return c.time_us * (1.0 if runs_at(c.algorithm, nbytes) else RUNNABLE_SLACK)

    last = [0.0]   # seconds the last evaluation took: the next one is about as long

    def out_of_time() -> bool:
        return (_time.process_time() - cpu + last[0] > budget_s
                and any(c.algorithm for c in cands))

    def evaluate_all(todo: list[Candidate]) -> bool:
        """Each at the instances its lanes were counted for; True once one is good enough."""
        for c in todo:
            if c.algorithm is not None:
                continue   # timed already (composed schedules)
            if out_of_time():
                return False
            best = min((rank(k) for k in cands), default=math.inf)
            if b is not None and c.floor_per_byte * nbytes * 0.995 >= best:
                continue   # its busiest resource alone is slower than the best so far
            began = _time.process_time()
            _evaluate(c, _protocols(objective, c.schedule), (c.hint,), machine, nbytes, target)
            last[0] = _time.process_time() - began
            if good is not None and c.time_us <= good and runs_at(c.algorithm, nbytes):
                return True
        return False

    done = evaluate_all(cands)
    if (not done and objective != "latency" and b is not None and topo.num_machines == 1
            and min(c.time_us for c in cands) > b.time_us(nbytes) / PATHS_BELOW):
        # streaming paths, and trees in more chunks (a closer rounding of the packing)
        least = h.ranks / b.algbw_GBps
        deep = bandwidth_schedules(h, collective, least, DEEP_COUNTS, rings=False)
        more = [_candidate(label, s, packed, b, topo.name, ref, nodes, hint)
                for label, s, packed, hint in path_schedules(h, collective, least) + deep]
        cands += more
        evaluate_all(more)
    fallback = _FallbackTime(collective, ref, nodes, machine, nbytes, topo.num_nodes(),
                             nccl_time)
    usable = _preferred([c for c in cands if c.algorithm is not None], nbytes, fallback)
    if not usable:
        raise MscclError(f"every {collective} schedule found on '{topo.name}' exceeds target "
                         f"{target}'s limits: {cands[0].refused}")
    if good is None or usable[0].time_us > good:
        for c in (c for c in usable[:2] if not c.composed):   # copied over more channels
            for inst in (i for i in INSTANCES if i > c.hint):
                if out_of_time():
                    break
                began = _time.process_time()
                _evaluate(c, (c.protocol,), (inst,), machine, nbytes, target)
                last[0] = _time.process_time() - began
    for best in _preferred(usable, nbytes, fallback):
        s = Synthesis(collective, topo.name, nbytes, best, cands, b, 0.0, ref, nodes, machine)
        try:
            s.xml(target)   # the verifier's word: the first that holds at every size wins
        except MscclError as exc:
            best.refused = str(exc)
            continue
        s.solve_s = _time.monotonic() - start
        return s
    raise MscclError(f"no {collective} schedule found on '{topo.name}' verifies: "
                     f"{usable[0].refused}")


def _preferred(usable: list[Candidate], nbytes: int, fallback) -> list[Candidate]:
    """``usable`` fastest first, except that the fastest schedule MSCCL runs at ``nbytes``
    goes first when it is within ``RUNNABLE_SLACK`` of the fastest and no slower than
    ``fallback()``, what NCCL runs for a call MSCCL refuses (its ring)."""
    order = sorted(usable, key=lambda c: c.time_us)
    if not order or runs_at(order[0].algorithm, nbytes):
        return order
    for c in order:
        if runs_at(c.algorithm, nbytes):
            if c.time_us <= order[0].time_us * RUNNABLE_SLACK and c.time_us <= fallback():
                order.remove(c)
                order.insert(0, c)
            break
    return order


class _FallbackTime:
    """The time (µs) of what NCCL runs at the objective's size, computed once when first
    asked: ``nccl_time`` (NCCL's own choice, ``simulate nccl``) where the caller gave it,
    else NCCL's ring at 1, 2 or 4 instances (the library's NCCL baseline); infinite where
    neither runs (or on clusters, whose rings take minutes to build)."""

    def __init__(self, collective, ref, nodes, machine, nbytes, ranks, nccl_time=None):
        self.args = (collective, ref, nodes, machine, nbytes, ranks)
        self.nccl_time = nccl_time
        self.value: float | None = None

    def __call__(self) -> float:
        if self.value is None and self.nccl_time is not None:
            try:
                self.value = float(self.nccl_time(self.args[4]))
            except MscclError:
                self.value = math.inf      # NCCL's model has no algorithm for the call
        if self.value is None:
            self.value = self._time(*self.args)
        return self.value

    @staticmethod
    def _time(collective, ref, nodes, machine, nbytes, ranks) -> float:
        from msccl_py import library
        from msccl_py.simulate import simulate
        name = {"allreduce": "nccl_ring", "allgather": "nccl_ring_allgather",
                "reduce_scatter": "nccl_ring_reduce_scatter"}.get(collective)
        if name is None or nodes:
            return math.inf
        best = math.inf
        for inst in (1, 2, 4):
            try:
                alg = library.compile(name, ranks, instances=inst, topology=ref)
            except MscclError:
                continue   # no ring over the links, or past the target's limits
            best = min(best, simulate(alg, machine, nbytes)[0].time_us)
        return best


def runs_at(alg: ir.Algorithm, nbytes: int, size: int = 4) -> bool:
    """True when MSCCL's size rule runs ``alg`` for a call of ``nbytes`` (nccl-tests' size)
    of ``size``-byte elements: the call's element count divides by its chunks per loop.

    >>> runs_at(synthesize("mi300x", "allgather").algorithm, 1 << 30)
    True
    """
    return nbytes % size == 0 and (nbytes // size) % alg.nchunksperloop == 0


def _evaluate(c: Candidate, protocols, instances, machine, nbytes: int, target: str) -> None:
    """Build, check against ``target``'s limits and time ``c`` at each setting; keep its best."""
    from msccl_py.targets import msccl as xmlmod
    from msccl_py.simulate import simulate
    for proto in protocols:
        for inst in instances:
            try:
                prog = build(c.source, c.label, protocol=proto, instances=inst)
                with prog:
                    alg = prog.lower()
                xmlmod.check_limits(alg, target)
            except LimitError as exc:
                c.refused = str(exc)
                break
            timing: list = []
            r = simulate(alg, machine, nbytes, timings=timing)[0]
            # never below the busiest resource's bytes / bandwidth (a guard: the model
            # extrapolates a pipeline that has not settled after 48 iterations)
            t = max(r.time_us, r.time_us - timing[0].time_us + timing[0].resource_bound_us)
            if t < c.time_us:
                c.time_us, c.algorithm, c.protocol, c.instances = t, alg, proto, inst
                c.program = prog


def _objective_bytes(objective: str | int) -> int:
    if isinstance(objective, int):
        if objective <= 0:
            raise MscclError(f"objective size must be positive, got {objective}")
        return objective
    if objective in OBJECTIVE_BYTES:
        return OBJECTIVE_BYTES[objective]
    from msccl_py.plan.sizes import parse_size
    return parse_size(objective)


def _protocols(objective, schedule: Schedule) -> tuple[str, ...]:
    """Protocols tried: the objective's, or for a size each schedule's own and LL128."""
    if objective == "bandwidth":
        return ("Simple",)
    if objective == "latency":
        return ("LL",)
    return (getattr(schedule, "protocol", "Simple"), "LL128")


def _reference(topology, topo) -> str:
    """What the program's ``load()`` names: a library name when it is one, else the file."""
    if isinstance(topology, (str, os.PathLike)) and not os.path.isfile(topology):
        return str(topology)
    src = getattr(topo, "source", None)
    if src and os.path.isfile(src):
        from msccl_py.topologies import available
        if available().get(topo.machine) and os.path.samefile(available()[topo.machine], src):
            return topo.machine
        return os.path.abspath(src)
    raise MscclError(f"topology '{topo.name}' has no file the program could load; pass "
                     f"topology_ref (a name or .topo path)")


def _bandwidth_candidates(h: Hops, topo, collective: str, b: Bound | None, machine: str,
                          ref: str, nodes: int | None) -> list[Candidate]:
    if collective not in KINDS:
        return [_candidate(label, s, packed, b, machine, ref, nodes, hint)
                for label, s, packed, hint in alltoall_schedules(h)]
    if topo.num_machines > 1:
        from msccl_py.synthesis.cluster import cluster_schedules
        return [_candidate(label, s, packed, b, machine, ref, nodes, hint)
                for label, s, packed, hint in cluster_schedules(h, topo, collective)]
    target = h.ranks / b.algbw_GBps
    return [_candidate(label, s, packed, b, machine, ref, nodes, hint)
            for label, s, packed, hint in bandwidth_schedules(h, collective, target)]


def _composed(topo, collective: str, objective, b: Bound | None, ref: str,
              nodes: int | None, machine, nbytes: int, target: str) -> list[Candidate]:
    """The composed allreduce of a cluster whose GPUs each have a NIC, timed; none for
    other collectives, latency, single machines or GPUs without NICs."""
    from msccl_py.targets.msccl.dialects import get_dialect
    if collective != "allreduce" or objective == "latency" or topo.num_machines < 2:
        return []
    try:
        plan = composed_plan(topo, b.algbw_GBps, get_dialect(target).max_steps_per_tb)
    except MscclError:
        return []   # no rails: the rail trees join the machines instead
    summary = [f"Allreduce on {topo.name} ({plan.ranks} ranks), synthesized by "
               f"`msccl-py synthesize` (composed: machine trees + rail rings).", "",
               f"Each machine reduces every GPU's shard onto it along the machine's packing "
               f"(the LP's trees), each rail's {plan.nodes} GPUs allreduce their shard around "
               f"a ring of the machines ({plan.halves} ring{'s' if plan.halves > 1 else ''} "
               f"per rail, {plan.ring_channels} channel{'s' if plan.ring_channels > 1 else ''} "
               f"each), and each machine copies the results out, block by block as the "
               f"ring needs and finishes them ({plan.chunks} chunks per rank).",
               f"Bandwidth bound: {b.algbw_GBps:.2f} GB/s algbw."]
    name = f"synth_allreduce_{_slug(topo.name)}"
    c = Candidate("composed", plan, composed_source(plan, name, ref, nodes, summary), summary,
                  name, composed=True)
    _evaluate(c, _protocols(objective, plan), (1,), machine, nbytes, target)
    return [c]


def _candidate(label: str, s: Schedule, packed_time: float, b: Bound | None, machine: str,
               ref: str, nodes: int | None, hint: int = 1) -> Candidate:
    summary = _summary(s, label, packed_time, b, machine)
    name = f"synth_{s.collective}_{_slug(machine)}"
    # µs per byte of the call: D = size / ranks per rank, packed_time s per GB of it
    floor = packed_time / s.ranks / 1e3 if b is not None else 0.0
    return Candidate(label, s, program_source(s, name, ref, nodes, summary), summary, name,
                     hint=hint, floor_per_byte=floor)


def _summary(s: Schedule, label: str, packed_time: float, b: Bound | None,
             machine: str) -> list[str]:
    title = s.collective.replace("_", "-")
    lines = [f"{title.capitalize()} on {machine} ({s.ranks} ranks), synthesized by "
             f"`msccl-py synthesize` ({label}).", ""]
    trees = len({(f.tree.kind, f.tree.root, f.tree.parent) for f in s.flows})
    what = "routes" if s.collective == "alltoall" else "spanning trees"
    lines.append(f"{trees} {what} over {s.channels} channels, {s.chunks} chunks in each "
                 f"{'pair' if s.collective == 'alltoall' else 'rank'}'s block.")
    if b is not None:
        packed = s.ranks / packed_time
        lines.append(f"Bandwidth bound: {b.algbw_GBps:.2f} GB/s algbw; these trees carry "
                     f"{packed:.2f} GB/s ({packed / b.algbw_GBps:.1%}) when the pipeline is full.")
    return lines


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in name)
