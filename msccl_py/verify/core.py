"""``verify``: static rules, connection matching, deadlock regimes and symbolic data.

>>> from msccl_py import ir
>>> def ring2(rank):
...     peer = 1 - rank
...     tb = ir.Threadblock(0, send_peer=peer, recv_peer=peer, steps=[
...         ir.Step("send", ir.Loc("i", rank), ir.Loc("i", rank)),
...         ir.Step("recv_reduce_copy", ir.Loc("i", peer), ir.Loc("i", peer)),
...         ir.Step("send", ir.Loc("i", peer), ir.Loc("i", peer)),
...         ir.Step("recv", ir.Loc("i", rank), ir.Loc("i", rank))])
...     return ir.Gpu(rank, 2, 0, 0, [tb])
>>> alg = ir.Algorithm("ring", "allreduce", "Simple", True, 2, 2, 1, [ring2(0), ring2(1)],
...                    outofplace=False)
>>> print(verify(alg))
ok: allreduce postcondition holds (in-place); deadlock-free with small and large messages
>>> alg.gpus[1].threadblocks[0].steps[1].op = "recv"     # forget to reduce on rank 1
>>> print(verify(alg))  # doctest: +ELLIPSIS
incorrect: rank 0 output chunk 0 holds {(0,0)} but should hold {(0,0) (1,0)} (missing (1,0)); last written by rank 0 tb 0 step 3 (recv); 2 chunks wrong (in-place call)
"""

from __future__ import annotations

import copy
import functools
import gc
from typing import Any

from msccl_py import ir
from msccl_py.errors import MscclError
from msccl_py.plan.geometry import LARGE, MAX_COUNT, SMALL, call_geometry, geometry
from msccl_py.plan.tables import (
    B_RANK,
    B_TB,
    OP_NAMES,
    S_BLOCK,
    S_INDEX,
    S_OP,
    Plan,
    PlanError,
    build_plan,
)
from msccl_py.plan.sizes import chunk_elems
from msccl_py.plan.connections import check_connections
from msccl_py.verify.data import SymbolicState, describe, difference
from msccl_py.plan.events import SimResult, simulate
from msccl_py.verify.postconditions import resolve
from msccl_py.plan.static import check_static, unused_flags
from msccl_py.targets.msccl.dialects import check_limits
from msccl_py.verify.verdict import Finding, RegimeResult, Verdict

#: pipeline iterations modelled at most for a given call size
MAX_MODEL_ITERATIONS = 3


def _modes(alg: ir.Algorithm, inplace: bool | None) -> list[bool]:
    if inplace is not None:
        return [bool(inplace)]
    modes = ([True] if alg.inplace else []) + ([False] if alg.outofplace else [])
    return modes or [False]


def regime_settings(alg: ir.Algorithm, plan: Plan, buffsize: int | None = None,
                    nbytes: int | None = None, itemsize: int = 4) -> dict[str, dict]:
    """Model parameters per regime: iterations, max_allowed_count, capacity, reachable."""
    g = geometry(alg.protocol, buffsize)
    maxc = plan.max_count
    cap = g.fifo_transfers
    if nbytes is not None:
        elems = chunk_elems(alg.nchunksperloop, nbytes, itemsize)
        cg = call_geometry(alg.protocol, alg.nchunksperloop, elems, itemsize, buffsize)
        name = SMALL if cg.max_allowed_count >= maxc else LARGE
        return {name: {"iterations": max(1, min(cg.iterations, MAX_MODEL_ITERATIONS)),
                       "mac": cg.max_allowed_count, "capacity": cap, "reachable": True}}
    small_max = g.small_max_bytes(alg.nchunksperloop, maxc)
    lo, hi = alg.min_bytes, alg.max_bytes
    small_ok = small_max > 0 and lo <= small_max and (hi == 0 or hi >= 1)
    large_ok = hi == 0 or hi > small_max
    return {
        SMALL: {"iterations": 1 if maxc > 1 else 2, "mac": min(maxc, MAX_COUNT - 1),
                "capacity": cap, "reachable": small_ok},
        LARGE: {"iterations": 2, "mac": 1, "capacity": cap, "reachable": large_ok},
    }


def _wrong_output(plan: Plan, state: SymbolicState, expected: dict) -> tuple[str, int] | None:
    """(diagnosis, number of wrong chunks) or None when every expected chunk matches."""
    nbad, first = state.mismatches(expected)
    if first is None:
        return None
    r, buf, k = first
    got, want = state.value(r, buf, k), expected[first]
    name = {"o": "output", "i": "input", "s": "scratch"}[buf]
    w = state.last_writer(r, buf, k)
    if w >= 0:
        blk = plan.blocks[plan.steps[w, S_BLOCK]]
        by = (f"last written by rank {blk[B_RANK]} tb {blk[B_TB]} step {plan.steps[w, S_INDEX]} "
              f"({OP_NAMES[plan.steps[w, S_OP]]})")
    else:
        by = "never written by any step"
    diff = difference(got, want)
    msg = (f"rank {r} {name} chunk {k} holds {describe(got)} but should hold {describe(want)}"
           f"{' (' + diff + ')' if diff else ''}; {by}")
    return msg, nbad


def verify(alg: ir.Algorithm, target: str = "msccl-executor", postcondition: Any = None,
           root: int | None = None, nbytes: int | None = None, itemsize: int = 4,
           buffsize: int | None = None, inplace: bool | None = None) -> Verdict:
    """Verify ``alg`` for runtime dialect ``target``.

    Without ``nbytes`` both message-size regimes are modelled (``small``: every
    step one transfer; ``large``: one transfer per chunk), each marked
    reachable or not by the algorithm's minBytes/maxBytes; with ``nbytes`` the
    one regime of that call size (``itemsize``-byte elements). The data check
    runs the in-place and/or out-of-place call the XML declares, or
    ``inplace`` if given. ``root`` is the root of a broadcast, reduce, gather
    or scatter (default: ``alg.root``, the XML's ``root`` attribute, else 0);
    one outside the rank range raises
    :class:`~msccl_py.errors.VerificationError`. See
    :mod:`msccl_py.verify.postconditions` for ``postcondition``.
    """
    root = resolve_root(alg, root)
    # the model allocates a few objects per step and chunk and frees them together: the
    # cyclic GC would only rescan them (a sixth of the time at 130k steps)
    enabled = gc.isenabled()
    gc.disable()
    try:
        plan = _try_plan(alg)
        findings = check_static(alg, functools.partial(check_limits, target=target), plan)
        if findings:
            return _invalid(alg, findings, postcondition, root, nbytes, itemsize, buffsize,
                            inplace, plan)
        return _verify_sound(alg, postcondition, root, nbytes, itemsize, buffsize, inplace,
                             plan)
    finally:
        if enabled:
            gc.enable()


def _try_plan(alg: ir.Algorithm) -> Plan | None:
    """``alg``'s plan, or None where the IR cannot be flattened (then the static rules say
    why, or :func:`_verify_sound` does, as without a plan)."""
    try:
        return build_plan(alg)
    except Exception:  # noqa: BLE001 - an IR the plan cannot hold is for the rules to name
        return None


def resolve_root(alg: ir.Algorithm, root: int | None) -> int:
    """``root``, else the algorithm's own (XML ``root``), else 0; checked against the ranks.

    >>> resolve_root(ir.Algorithm("b", "broadcast", "Simple", False, 4, 1, 1, root=3), None)
    3
    """
    from msccl_py.errors import VerificationError
    if root is None:
        if alg.root is None:
            return 0  # the default needs no check (the static rules catch ngpus=0)
        root = alg.root
    if isinstance(root, bool) or not isinstance(root, int) or not 0 <= root < alg.ngpus:
        raise VerificationError(f"root {root!r} is not a rank of {alg.name!r}, which has "
                                f"{alg.ngpus} ranks (0..{alg.ngpus - 1})")
    return root


def _invalid(alg, findings, postcondition, root, nbytes, itemsize, buffsize, inplace,
             plan=None) -> Verdict:
    """An ``invalid`` verdict; when only the target's limits or the collective's chunk shape
    are broken, the model still runs (as a custom collective for a shape problem) and its
    outcome is added, so the report says what the program would otherwise do."""
    verdict = Verdict("invalid", str(findings[0]), errors=findings)
    kinds = {f.kind for f in findings}
    if not kinds <= {"limit", "collective"}:
        return verdict
    other = alg
    if "collective" in kinds:
        other = copy.copy(alg)
        other.collective = "custom"
        postcondition = None
        plan = None   # the plan knows the collective (its call chunks)
    try:
        inner = _verify_sound(other, postcondition, root, nbytes, itemsize, buffsize, inplace,
                              plan)
    except MscclError:
        return verdict
    if inner.status == "invalid":
        return verdict
    verdict.regimes = inner.regimes
    verdict.errors = findings + inner.errors
    if other is not alg:
        stuck = [r.name for r in inner.regimes.values() if not r.deadlock_free]
        free = [r.name for r in inner.regimes.values() if r.deadlock_free]
        how = (f"deadlocks with {' and '.join(stuck)} messages" if stuck else
               f"is deadlock-free with {' and '.join(free)} messages")
        verdict.reason += f" (read as a custom collective, its structure is sound and it {how})"
    else:
        verdict.reason += f" (otherwise {inner.status}: {inner.reason})"
    return verdict


def _verify_sound(alg, postcondition, root, nbytes, itemsize, buffsize, inplace,
                  plan=None) -> Verdict:
    if plan is None:
        try:
            plan = build_plan(alg)
        except PlanError as exc:
            return Verdict("invalid", str(exc), errors=[Finding("static", str(exc))])
    findings = check_connections(plan)
    if findings:
        return Verdict("invalid", str(findings[0]), errors=findings)
    warnings = unused_flags(alg)
    settings = regime_settings(alg, plan, buffsize, nbytes, itemsize)
    out_chunks = [int(c) for c in plan.call_chunks[:, 1]]
    initial, expected = resolve(postcondition, alg.collective, alg.ngpus, alg.nchunksperloop,
                                plan.call_chunks.tolist(), out_chunks, root)
    modes = _modes(alg, inplace)
    regimes: dict[str, RegimeResult] = {}
    data_errors: list[Finding] = []
    data_done = expected is None
    # the schedule depends on the settings alone, not on the data: regimes that model alike
    # (every count 1: one transfer per step either way) share one run
    runs: dict[tuple, SimResult] = {}
    for name, s in settings.items():
        key = (s["iterations"], s["mac"], s["capacity"])
        res = runs.get(key)
        states = []
        if res is None:
            data = None
            if not data_done:
                states = [SymbolicState(plan, m, initial) for m in modes]
                data = states[0]
            res = runs[key] = simulate(plan, *key, data=data)
        regimes[name] = RegimeResult(name, res.completed, s["iterations"], s["mac"],
                                     s["capacity"], s["reachable"], res.cycle, res.blocked)
        if not res.completed or data_done:
            continue
        data_done = True
        for m, state in zip(modes, states):
            if state is not states[0]:
                simulate(plan, 1, s["mac"], s["capacity"], data=state)
            mode = "in-place" if m else "out-of-place"
            if callable(expected):
                text = expected(state)
                bad = None if text is None else (f"{text} (the collective's check)", None)
            else:
                bad = _wrong_output(plan, state, expected)
            if bad is None:
                race = state.race()
                if race is not None:
                    data_errors.append(Finding("data", f"{race} ({mode} call; the result "
                                               "depends on the schedule)"))
                continue
            count = "" if bad[1] is None else f"; {bad[1]} chunk{'s' if bad[1] != 1 else ''} wrong"
            data_errors.append(Finding("data", f"{bad[0]}{count} ({mode} call)"))
    deadlocks = [r for r in regimes.values() if not r.deadlock_free and r.reachable]
    if data_errors:
        return Verdict("incorrect", data_errors[0].message, regimes, data_errors, warnings)
    if deadlocks:
        d = deadlocks[0]
        cyc = "; ".join(str(w) for w in d.cycle[:4])
        more = f"; ... ({len(d.cycle)} in the cycle)" if len(d.cycle) > 4 else ""
        errs = [Finding("deadlock", f"{r.name} messages: " + "; ".join(map(str, r.cycle)))
                for r in deadlocks]
        return Verdict("deadlock", f"deadlocks with {d.name} messages: {cyc}{more}", regimes,
                       errs, warnings)
    if not data_done:
        return Verdict("deadlock", "every modelled regime deadlocks", regimes, [], warnings)
    return Verdict("ok", _ok_reason(alg, expected, modes, regimes), regimes, [], warnings)


def _ok_reason(alg: ir.Algorithm, expected, modes, regimes) -> str:
    what = (f"no postcondition for collective {alg.collective}; only structure and "
            f"deadlock-freedom checked" if expected is None else
            f"{alg.collective} postcondition holds "
            f"({', '.join('in-place' if m else 'out-of-place' for m in modes)})")
    free = [r.name for r in regimes.values() if r.deadlock_free]
    text = f"{what}; deadlock-free with {' and '.join(free)} messages"
    unsafe = [r.name for r in regimes.values() if not r.deadlock_free]
    if unsafe:
        text += (f"; {' and '.join(unsafe)} messages would deadlock but maxBytes="
                 f"{alg.max_bytes} keeps the runtime from selecting it there")
    return text


def safe_max_bytes(alg: ir.Algorithm, verdict: Verdict, buffsize: int | None = None
                   ) -> int | None:
    """Largest per-rank size (bytes, as NCCL counts it) for which ``alg`` runs in the small regime.

    ``None`` when no bound is needed (the large regime is deadlock-free too);
    raises :class:`~msccl_py.errors.VerificationError` when the small regime
    deadlocks as well (no size is safe). The compiler writes the result as
    ``maxBytes`` (inclusive).

    >>> from msccl_py import ir
    >>> alg = ir.Algorithm("a", "allreduce", "Simple", True, 2, 8, 1)
    >>> v = Verdict("deadlock", "x", {"small": RegimeResult("small", True, 1, 2, 2),
    ...                               "large": RegimeResult("large", False, 2, 1, 2)})
    >>> safe_max_bytes(alg, v) == 8 * geometry("Simple").iter_bytes
    True
    """
    from msccl_py.errors import VerificationError
    large = verdict.regimes.get(LARGE)
    small = verdict.regimes.get(SMALL)
    if large is not None and large.deadlock_free:
        return None
    if small is None or not small.deadlock_free:
        hint = ("; give flows that share a connection separate channels (ch=) or "
                "threadblocks, so no threadblock sends more than its FIFO holds before it "
                "receives" if "waits for room in the FIFO" in str(verdict) else "")
        raise VerificationError(f"{alg.name}: no message size is deadlock-free ({verdict})"
                                + hint)
    maxc = max((st.count for _, tb in alg.threadblocks() for st in tb.steps), default=1)
    return geometry(alg.protocol, buffsize).small_max_bytes(alg.nchunksperloop, max(1, maxc))
