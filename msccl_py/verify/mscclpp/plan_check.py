"""Verify an MSCCL++ plan: executor limits, deadlock, races and the collective's postcondition.

The plan runs through :func:`msccl_py.plan.mscclpp.execute.execute` on fingerprint
inputs: every input element is a distinct random integer (exact in float64),
so an output element equals the expected sum or copy only if it holds
exactly the right contributions. It runs once per message-size regime the
plan declares: the smallest size it accepts, and, when it has pipelines, a
size at which every pipeline takes at least two iterations (signals and
waits inside a pipeline repeat per iteration). Each finding is one line
naming the rank, threadblock and operation index.

>>> from msccl_py.targets.mscclpp.read import read_plan_text
>>> plan = read_plan_text('{"name":"c","collective":"test","protocol":"Simple","inplace":false,'
...   '"gpus":[{"id":0,"input_chunks":1,"output_chunks":1,"scratch_chunks":0,"channels":[],'
...   '"remote_buffers":[],"threadblocks":[{"id":0,"channels":[],"ops":[{"name":"copy",'
...   '"src_buff":[{"type":"i","index":0,"size":1}],"dst_buff":[{"type":"o","index":0,"size":1}]}]}]}]}')
>>> print(verify_plan(plan).report())
ok: no deadlock or race at 64 B (collective 'test' has no postcondition to check)
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from msccl_py.plan.mscclpp.geometry import geometry, pipeline_size, smallest_size
from msccl_py.plan.mscclpp.execute import execute
from msccl_py.mscclpp_ir import Plan
from msccl_py.targets.mscclpp.limits import check_limits

POSTCONDITIONS = ("allreduce", "allgather", "reduce_scatter", "alltoall", "sendrecv")
_ORDER = ("invalid", "deadlock", "incorrect", "race", "ok")


@dataclass
class PlanVerdict:
    status: str                               # ok, incorrect, deadlock, race or invalid
    summary: str
    findings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def report(self) -> str:
        return "\n".join([f"{self.status}: {self.summary}"] + [f"  {f}" for f in self.findings])


def regimes(plan: Plan) -> list[int]:
    """The message sizes to check: smallest accepted, and one with multi-iteration pipelines."""
    sizes = [smallest_size(plan)]
    big = pipeline_size(plan)
    if big is not None and big != sizes[0]:
        sizes.append(big)
    return sizes


def fingerprints(plan: Plan, nbytes: int, seed: int = 0) -> list[np.ndarray]:
    """Distinct random integers per input element, exact under sums of every rank's values.

    float64 (values below 2**24) when the plan's alignment allows 8-byte elements, else
    float32 (values below 2**16, exact for sums of up to 256 ranks).
    """
    geo = geometry(plan, nbytes)
    rng = np.random.default_rng(seed)
    wide = plan.buffer_alignment % 8 == 0
    dtype, top = (np.float64, 2**24) if wide else (np.float32, 2**16)
    size = np.dtype(dtype).itemsize
    return [rng.integers(1, top, s["i"] // size).astype(dtype) for s in geo.sizes]


def expected(plan: Plan, inputs: list[np.ndarray], reduce=np.add) -> list[np.ndarray] | None:
    """Each rank's expected output, or None for a collective without a postcondition."""
    n = plan.nranks
    c = plan.collective
    if c == "allreduce":
        total = inputs[0].copy()
        for x in inputs[1:]:
            total = reduce(total, x)
        return [total] * n
    if c == "allgather":
        return [np.concatenate(inputs)] * n
    if c == "reduce_scatter":
        total = inputs[0].copy()
        for x in inputs[1:]:
            total = reduce(total, x)
        blk = total.size // n
        return [total[r * blk:(r + 1) * blk] for r in range(n)]
    if c == "alltoall":
        blk = inputs[0].size // n
        return [np.concatenate([inputs[s][r * blk:(r + 1) * blk] for s in range(n)]) for r in range(n)]
    return None


def check_data(plan: Plan, inputs, outputs, last_writer=None) -> list[str]:
    """One line per rank whose output breaks the postcondition; ``last_writer(rank, element)`` names
    the operation that last wrote an output element (``Result.last_writer``)."""
    out = []
    if plan.collective == "sendrecv":
        used = set()
        for r, o in enumerate(outputs):
            src = [s for s, x in enumerate(inputs) if s != r and x.shape == o.shape and np.array_equal(x, o)]
            if not src:
                near = inputs[(r - 1) % len(inputs)]
                out.append(f"incorrect: rank {r} output is not any other rank's input "
                           f"(against rank {(r - 1) % len(inputs)}'s: "
                           f"{_first_bad(o, near, r, last_writer, inputs)})")
            elif src[0] in used:
                out.append(f"incorrect: rank {r} receives rank {src[0]}'s input, which another rank "
                           f"also receives")
            else:
                used.add(src[0])
        return out
    want = expected(plan, inputs)
    for r, (o, e) in enumerate(zip(outputs, want)):
        if o.shape != e.shape:
            out.append(f"incorrect: rank {r} output has {o.size} elements, the {plan.collective} "
                       f"needs {e.size}")
        elif not np.array_equal(o, e):
            # a reduction's output element i sums every rank's input element ``first + i``
            first = None if plan.collective not in ("allreduce", "reduce_scatter") else \
                r * o.size if plan.collective == "reduce_scatter" else 0
            out.append(f"incorrect: rank {r} output {_first_bad(o, e, r, last_writer, inputs, first)}")
    return out


def _first_bad(o, e, rank: int = 0, last_writer=None, inputs=None, first: int | None = None) -> str:
    """Where ``o`` first differs from ``e``, what it holds there (which input element, or for a
    reduction, from ``first``, which ranks' contributions), and which operation last wrote there."""
    if o.shape != e.shape:
        return f"has {o.size} elements, expected {e.size}"
    bad = np.nonzero(~(o == e))[0]
    i = int(bad[0])
    text = f"element {i} (of {o.size}) is wrong ({len(bad)} wrong elements)"
    if inputs is not None and first is not None and not np.isnan(o[i]):
        text += f": holds {_contributions(o[i], [x[first + i] for x in inputs], first + i)}"
    elif inputs is not None and not np.isnan(o[i]):
        text += f": holds {_source(o[i], inputs)}, should hold {_source(e[i], inputs)}"
    if last_writer is None:
        return text + (", never written" if np.isnan(o[i]) else "")
    by = last_writer(rank, i)
    return f"{text}; last written by {by}" if by else f"{text}; never written by any operation"


def _contributions(value, terms: list, j: int) -> str:
    """Which ranks' input element ``j`` a reduced fingerprint sums (distinct random integers make the
    subset unique), against the sum of all of them."""
    n = len(terms)
    if n <= 12:
        masks = (np.arange(1 << n)[:, None] >> np.arange(n)) & 1
        hit = np.nonzero(masks @ np.asarray(terms, np.float64) == value)[0]
        if hit.size:
            have = [r for r in range(n) if masks[hit[0], r]]
            missing = [r for r in range(n) if r not in have]
            if not missing:
                return f"the sum of every rank's input element {j}"
            what = (f"rank {have[0]}'s input element {j} alone" if len(have) == 1 else
                    f"the sum of input element {j} of ranks {_ranks(have)}")
            return f"{what}, missing ranks {_ranks(missing)}"
    return f"a value that is no sum of the ranks' input element {j}, which it should hold the sum of"


def _ranks(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks)) if ranks else "none"


def _source(value, inputs) -> str:
    """Which input element a fingerprint value is (each is a distinct random integer), or that it is none."""
    for r, x in enumerate(inputs):
        hit = np.nonzero(x == value)[0]
        if hit.size:
            return f"rank {r}'s input element {int(hit[0])}"
    return "a combination of inputs" if value == value else "nothing"


def check_operands(plan: Plan) -> list[str]:
    """Operations whose buffer references differ in size: the executor moves one size for all."""
    out = []
    for g in plan.gpus:
        for tb in g.threadblocks:
            for k, top in enumerate(tb.ops):
                for op in [top] + top.ops:
                    refs = [("src_buff", j, r) for j, r in enumerate(op.src)] + \
                           [("dst_buff", j, r) for j, r in enumerate(op.dst)]
                    if len({r.size for _, _, r in refs}) > 1:
                        first = refs[0]
                        odd = next(x for x in refs if x[2].size != first[2].size)
                        out.append(f"incorrect: rank {g.rank} threadblock {tb.id} op {k} ({op.name}) "
                                   f"moves {first[0]}[{first[1]}] of {first[2].size} chunk(s) but "
                                   f"{odd[0]}[{odd[1]}] of {odd[2].size}; the executor moves one size "
                                   f"for all its operands")
    return out


def next_launch(plan: Plan, nbytes: int, ends: dict, seen=()) -> list[str]:
    """Findings for semaphores whose count a launch leaves changed, and for the launch after it.

    The executor creates a plan's device semaphores once and keeps them across
    launches, so the next launch starts each at the count this one left.
    """
    out = []
    for (rank, s), (end, acquires, releases) in sorted(ends.items()):
        init = plan.gpus[rank].semaphores[s]
        drift = end - init
        counts = (f"rank {rank} semaphore {s} (initial value {init}) is released {releases} and "
                  f"acquired {acquires} times per launch")
        if drift > 0 and acquires:
            out.append(f"race: {counts}, so its count drifts up by {drift} per launch: in the next "
                       f"launch an acquire passes before the release it pairs with")
        elif drift < 0:
            out.append(f"deadlock: {counts}, so its count drifts down by {-drift} per launch: launch "
                       f"{init // -drift + 2} starts it below zero and an acquire there can wait forever")
    again = replace(plan, gpus=[replace(g, semaphores=tuple(ends.get((g.rank, k), (v,))[0]
                                                              for k, v in enumerate(g.semaphores)))
                                for g in plan.gpus])
    res = execute(again, nbytes, fingerprints(plan, nbytes, seed=1))
    out += [f"{line} [launch 2]" for line in res.deadlocks + res.races if line not in seen]
    return out


def verify_plan(plan: Plan, nbytes: int | None = None) -> PlanVerdict:
    """The verdict on ``plan`` at ``nbytes``, or at every size regime it declares."""
    limits = check_limits(plan)
    if limits:
        return PlanVerdict("invalid", "the MSCCL++ executor cannot load this plan", limits)
    operands = check_operands(plan)
    if operands:
        return PlanVerdict("incorrect", f"{len(operands)} operation(s) with mismatched operand sizes",
                           operands[:20])
    sizes = [nbytes] if nbytes is not None else regimes(plan)
    findings, status = [], "ok"
    for size in sizes:
        inputs = fingerprints(plan, size)
        res = execute(plan, size, inputs)
        lines = res.invalid + res.deadlocks
        if not res.invalid and not res.deadlocks and plan.collective in POSTCONDITIONS:
            lines += check_data(plan, inputs, res.outputs, res.last_writer)
        lines += res.races
        if res.semaphores:
            lines += next_launch(plan, size, res.semaphores, set(lines))
        for line in lines:
            kind = line.split(":", 1)[0]
            if _ORDER.index(kind) < _ORDER.index(status):
                status = kind
            tagged = f"{line} [at {size} B]" if len(sizes) > 1 else line
            if tagged not in findings:
                findings.append(tagged)
    at = " and ".join(f"{s} B" for s in sizes)
    if status == "ok":
        what = (f"{plan.collective} postcondition holds" if plan.collective in POSTCONDITIONS
                else f"collective {plan.raw_collective!r} has no postcondition to check")
        if plan.collective in POSTCONDITIONS:
            return PlanVerdict("ok", f"{what}; no deadlock or race at {at}")
        return PlanVerdict("ok", f"no deadlock or race at {at} ({what})")
    counts = {k: sum(1 for f in findings if f.startswith(k + ":")) for k in _ORDER[:-1]}
    summary = ", ".join(f"{v} {k}" for k, v in counts.items() if v)
    return PlanVerdict(status, f"{summary} finding(s) at {at}", findings)
