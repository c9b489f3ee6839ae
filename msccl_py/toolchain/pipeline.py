"""The one pipeline: a recorded program (or an IR) and a target in, an artifact out.

One policy, in this order: the target's limits (the program's line named
for a channel past them), the collective's judgement of the result (a wrong
result is refused unless forced), the verifier (a large-message deadlock
bounds ``maxBytes``; any other failure is refused), then the target text.
Nothing here prints or changes what it is given: what the pipeline has to
say comes back as the artifact's ``notes``, and an error raised after a note
carries the notes so far in its own ``notes``.

>>> from msccl_py.language import MSCCLProgram, Buffer, chunk
>>> from msccl_py.language.collectives import AllGather
>>> with MSCCLProgram("ag", None, AllGather(2, 1, False), 1) as prog:
...     for r in range(2):
...         _ = chunk(r, Buffer.input, 0).copy(r, Buffer.output, r).copy(1 - r)
>>> art = compile(prog.recording())
>>> art.target, art.verdict.status, art.text.startswith('<algo name="ag"')
('msccl-executor', 'ok', True)
"""

from __future__ import annotations

import atexit
import dataclasses
import gc
from typing import Any

from msccl_py import ir
from msccl_py.compiler.lower import gc_resume, lower_base, lower_with_base
from msccl_py.compiler.replicate import replicate_ir
from msccl_py.errors import LimitError, LoweringError, MscclError, ProgramError, \
    VerificationError, WrongResultError
from msccl_py.toolchain.artifact import Artifact, Policy
from msccl_py.toolchain.beside import Beside
from msccl_py.toolchain.judge import Judgement, failure_message, judge, postcondition
from msccl_py.toolchain.sources import Recording

#: the MSCCL++ execution-plan target (every other target is an MSCCL XML dialect)
MSCCLPP = "mscclpp"

_DEFAULT = Policy()


def lower(rec: Recording) -> tuple[ir.Algorithm, ir.Algorithm | None]:
    """``(alg, base)``: the lowered IR of ``rec``, and the one-instance IR it replicates
    (None when instances were not replicated after lowering; a verdict on it holds for all)."""
    if rec.lowered is not None:
        return rec.lowered
    return lower_with_base(rec.trace)


def _lower_parts(rec: Recording) -> tuple[ir.Algorithm | None, ir.Algorithm | None, int]:
    """``(alg, base, n)`` as :func:`lower`, except that with ``n`` > 1 ``alg`` is not made
    yet: it is ``replicate_ir(base, n)``, which the caller makes when it needs it."""
    if rec.lowered is not None:
        alg, base = rec.lowered
        return alg, base, 1
    one, n = lower_base(rec.trace)
    return (one, None, 1) if n == 1 else (None, one, n)


def compile(source: Recording | ir.Algorithm, target: str | None = None,
            policy: Policy = _DEFAULT) -> Artifact:
    """Compile ``source`` for ``target`` under ``policy``.

    ``source`` is a DSL program's :class:`Recording` (the library's programs
    included) or a lowered ``ir.Algorithm``. ``target`` is an MSCCL XML
    dialect (``msccl``, ``msccl-executor``, ``rccl``), ``mscclpp`` for an
    MSCCL++ plan, or None: the newer runtimes' dialect, or the one that runs
    the collective when they cannot (a note says so).
    """
    # One pause for the whole path: re-enabling the GC between passes makes it scan
    # every object the last pass left (0.1-0.4 s a time at 500k steps). Inline rather
    # than a context manager: allocating one can set off the collection it avoids.
    enabled = gc.isenabled()
    gc.disable()
    notes: list[str] = []
    try:
        if target == MSCCLPP:
            return _plan(source, policy, notes)
        if isinstance(source, Recording):
            return _program(source, target, policy, notes)
        if isinstance(source, ir.Algorithm):
            return _algorithm(source, target, policy, notes)
        raise MscclError(f"cannot compile a {type(source).__name__}: give a program's "
                         f"recording or an ir.Algorithm")
    except MscclError as exc:
        if notes:  # said before the error, as they arose
            exc.notes = (*notes, *exc.notes)
        raise
    finally:
        if enabled:
            gc_resume()


#: IR steps from which a compile's heap is worth leaving out of the collections at exit
LARGE_PROGRAM = 50_000
_exit_hooked = False


def _light_exit(alg: ir.Algorithm) -> None:
    """After a large compile, leave the heap out of the final garbage collections (once).

    A compiled program keeps hundreds of thousands of small objects (IR steps,
    the trace) alive to the end; the interpreter's last full collections
    traverse and free them all, a tenth of a second at 100k steps, for memory
    the process is about to give back anyway. Freezing the GC at exit skips that;
    objects still alive then are not promised finalization by Python anyway, and
    the package's own resources (shared memory, workers) close in atexit hooks.
    """
    global _exit_hooked
    if _exit_hooked or _steps(alg) < LARGE_PROGRAM:
        return
    _exit_hooked = True
    atexit.register(gc.freeze)


def _steps(alg: ir.Algorithm) -> int:
    return sum(len(tb.steps) for g in alg.gpus for tb in g.threadblocks)


def _program(rec: Recording, target: str | None, policy: Policy, notes: list[str]) -> Artifact:
    from msccl_py.targets.msccl import default_target
    alg, base, instances = _lower_parts(rec)
    one = alg if alg is not None else base
    chosen = target is None
    if chosen:
        target = default_target(one.collective)
    # a large program's verification needs nothing the rest makes: it runs beside the
    # replication, judge and writer where the machine allows (see ``Beside``)
    job = None
    if policy.verify and _steps(one) * instances >= LARGE_PROGRAM:
        job = Beside(_verified, (rec, None if alg is None else _rooted(rec, alg), base,
                                 instances, target))
    try:
        return _finish_program(rec, alg, base, instances, target, chosen, policy, notes, job)
    finally:
        if job is not None:
            job.cancel()


def _finish_program(rec: Recording, alg: ir.Algorithm | None, base: ir.Algorithm | None,
                    instances: int, target: str, chosen: bool, policy: Policy,
                    notes: list[str], job: Beside | None) -> Artifact:
    from msccl_py.targets.msccl import check_limits, write_xml
    from msccl_py.targets.msccl.dialects import DEFAULT_TARGET
    if alg is None:
        alg = replicate_ir(base, instances)
    lowered = (alg, base)
    _light_exit(alg)
    alg = _rooted(rec, alg)
    _check_channels(rec, alg, target)
    try:
        _check_limits(alg, base, target)
    except LimitError as exc:  # name the program too, not only the GPU and threadblock
        raise LimitError(f"{rec.name}: {exc}", line=rec.line, file=rec.file) from None
    right, judgement = _judge(rec, policy.force, notes)
    text = None
    if policy.text and job is not None and job.running:  # written while the verifier runs
        text = write_xml(alg, target, dependence_nop=rec.dependence_nop, check_limits_first=False)
    verdict = None
    if policy.verify:
        if job is not None and job.running:
            import msccl_py.verify  # noqa: F401 - the verdict's classes, loaded while it works
        verdict, max_bytes, said = (job.result() if job is not None
                                    else _verified(rec, alg, base, 1, target))
        notes.extend(said)
        if max_bytes != alg.max_bytes:
            alg = dataclasses.replace(alg, max_bytes=max_bytes)
            text = None
    if not right:
        verdict = None  # it compared with the program's own (wrong) result
    if chosen and target != DEFAULT_TARGET:
        notes.append(f"note: {rec.name}: collective {alg.collective!r} runs only on target "
                     f"{target}; writing that dialect")
    if policy.text:
        if text is None:
            text = write_xml(alg, target, dependence_nop=rec.dependence_nop,
                             check_limits_first=False)
    else:
        text = None
        if rec.dependence_nop:  # the writer would check the hoisted waits' nops
            from msccl_py.targets.msccl import hoist_reduce_dependencies
            check_limits(hoist_reduce_dependencies(alg), target)
    return Artifact(rec.name, target, alg, text, verdict, right, notes, rec,
                    judgement=judgement, lowered=lowered)


def _rooted(rec: Recording, alg: ir.Algorithm) -> ir.Algorithm:
    """``alg`` with the root the program's collective names (a copy when it differs)."""
    root = getattr(rec.collective, "root", None) if alg.collective in ir.ROOTED else alg.root
    return alg if root == alg.root else dataclasses.replace(alg, root=root)


def _check_limits(alg: ir.Algorithm, base: ir.Algorithm | None, target: str) -> None:
    """``check_limits(alg, target)``, from the one-instance ``base`` that ``alg`` replicates.

    Replicas have their base threadblock's steps, so once ``alg``'s threadblock
    counts and channels fit, the per-step limits of ``base`` are ``alg``'s; any
    failure is found again on ``alg`` itself, for its exact message.
    """
    from msccl_py.targets.msccl import check_limits, get_dialect
    if base is not None:
        d = get_dialect(target)
        max_tbs, max_channels = d.max_tbs_per_gpu, d.max_channels
        if all(len(g.threadblocks) <= max_tbs
               and all(0 <= tb.channel < max_channels for tb in g.threadblocks)
               for g in alg.gpus):
            try:
                check_limits(dataclasses.replace(base, nchannels=alg.nchannels), d)
                return
            except LimitError:
                pass
    check_limits(alg, target)


def _judge(rec: Recording, force: bool, notes: list[str]) -> tuple[bool, Judgement | None]:
    """Refuse a result that is not the declared collective's (``force``: a warning).

    ``(right, judgement)``: right is True when the result was judged right, False
    when it is written anyway or the collective has no ``check()`` to judge by;
    the judgement is None when a passed Check() made judging again needless.
    """
    if rec.checked:
        return True, None
    j = judge(rec)
    if j.ok is None:
        notes.append(f"note: {rec.name}: {type(rec.collective).__name__} defines no check(), "
                     f"so nothing says what the result should be; the XML is verified against "
                     f"the program's own result only")
        return False, j
    if j.ok:
        return True, j
    msg, details = failure_message(rec, j)
    if not force:
        exc = WrongResultError(f"{msg}; no XML written", *rec.call)
        failed_checks = [ln for ln in rec.log.report if ": Check() failed" in ln]
        exc.details = (*details, "compile --force writes the XML anyway", *failed_checks)
        raise exc
    notes.append(f"warning: {msg}; writing the XML anyway (--force)")
    return False, j


def _verified(rec: Recording, alg: ir.Algorithm | None, base: ir.Algorithm | None,
              instances: int, target: str) -> tuple[Any, int, list[str]]:
    """``(verdict, maxBytes, notes)``: the lowered program executed with the runtime's
    semantics against the recorded result, and the ``maxBytes`` that keeps the runtimes
    from selecting it where it deadlocks. A pure function (what it has to say comes back
    as notes), so it can run beside the rest of the compile. ``alg`` None: it is
    ``instances`` copies of ``base``, made here only if a deadlock needs its geometry."""
    from msccl_py.verify import safe_max_bytes, verify
    from msccl_py.targets.msccl import hoist_reduce_dependencies
    # dependence_nop moves waits earlier, which can close a wait cycle: check what is written
    written = hoist_reduce_dependencies if rec.dependence_nop else (lambda a: a)
    if base is not None:
        # instances are disjoint copies on their own channels: the verdict of one is the
        # verdict of all (the geometry still comes from ``alg``)
        verdict = verify(written(base), target=target, postcondition=postcondition(rec, 1))
    else:
        verdict = verify(written(alg), target=target, postcondition=postcondition(rec))
    notes: list[str] = []
    max_bytes = (alg if alg is not None else base).max_bytes
    if verdict.status == "deadlock":
        if alg is None:
            alg = _rooted(rec, replicate_ir(base, instances))
        limit = safe_max_bytes(alg, verdict)
        if limit is not None:
            max_bytes = limit
            notes.append(f"note: {rec.name}: {verdict.reason}; maxBytes={limit} keeps the "
                         f"runtimes from selecting it for larger messages")
    elif verdict.status != "ok":
        if rec.apart_in_place:
            raise ProgramError(
                f"{rec.name}: the collective says inplace=True, so the runtimes give "
                f"input and output one buffer, but its init_buffers() keeps them apart; "
                f"in one buffer the result is wrong ({verdict}). Declare it with "
                f"inplace=False, or make output the same list as input in init_buffers()",
                rec.file, rec.line)
        raise LoweringError(f"{rec.name}: the lowered program does not reproduce the "
                            f"program's result ({verdict}); this is a compiler bug, "
                            f"please report it with the program")
    return verdict, max_bytes, notes


def _check_channels(rec: Recording, alg: ir.Algorithm, target: str) -> None:
    """Name the program line whose channel exceeds the target's limit."""
    from msccl_py.targets.msccl import get_dialect
    limit = get_dialect(target).max_channels
    if alg.nchannels <= limit:
        return
    worst = max(rec.trace.ops, key=lambda op: op.ch)
    raise LimitError(f"the program uses {alg.nchannels} channels (after {rec.trace.instances} "
                     f"instance(s)); target {target} allows at most {limit}"
                     + (f" (ch={worst.ch} here)" if worst.ch >= 0 else ""),
                     line=worst.line, file=worst.file)


def _algorithm(alg: ir.Algorithm, target: str | None, policy: Policy,
               notes: list[str]) -> Artifact:
    """An IR from elsewhere (a file, a tuner): limits, verification against its collective,
    the same ``maxBytes`` bound, and the text."""
    from msccl_py.verify import safe_max_bytes, verify
    from msccl_py.targets.msccl import check_limits, default_target, write_xml
    target = target or default_target(alg.collective)
    check_limits(alg, target)
    verdict = None
    out = alg
    if policy.verify:
        verdict = verify(alg, target=target)
        if verdict.status == "deadlock":
            limit = safe_max_bytes(alg, verdict)
            if limit is not None:
                out = dataclasses.replace(alg, max_bytes=limit)
                notes.append(f"note: {alg.name}: {verdict.reason}; maxBytes={limit} keeps the "
                             f"runtimes from selecting it for larger messages")
        elif verdict.status != "ok":
            raise VerificationError(f"{alg.name}: {verdict}; not written")
    text = write_xml(out, target, check_limits_first=False) if policy.text else None
    return Artifact(alg.name, target, out, text, verdict, None, notes, alg)


def _plan(source: Recording | ir.Algorithm, policy: Policy, notes: list[str]) -> Artifact:
    """An MSCCL++ plan: a program passes the XML pipeline first (for its default dialect,
    which also judges and verifies it), then the plan is emitted, read back and verified."""
    from msccl_py.plan.mscclpp.geometry import runs_powers_of_two
    from msccl_py.toolchain.mscclpp_plan import emit
    if isinstance(source, Recording):
        first = _program(source, None, dataclasses.replace(policy, text=False), notes)
        alg, judged, judgement = first.algorithm, first.judged, first.judgement
    else:
        alg, judged, judgement = source, None, None
    plan, text, verdict = emit(alg, policy.gpus_per_node)
    if not runs_powers_of_two(plan):
        notes.append(f"note: {plan_sizes_note(alg.name, plan)}")
    return Artifact(alg.name, MSCCLPP, alg, text if policy.text else None, verdict, judged,
                    notes, source, plan, judgement,
                    first.lowered if isinstance(source, Recording) else None)


def plan_chunks(plan) -> str:
    """How a plan cuts each buffer, as the size notes say it."""
    g = plan.gpus[0]
    return (f"{g.input_chunks} input and {g.output_chunks} output chunks"
            if g.input_chunks != g.output_chunks else f"{g.input_chunks} chunks")


def plan_sizes_note(name: str, plan, instead: str = "") -> str:
    """Which message sizes the MSCCL++ executor runs ``plan`` at, when not every power of two."""
    from msccl_py.plan.mscclpp.geometry import message_quantum, size_rule
    quantum = message_quantum(plan)
    if quantum > 1 << 20 or (1 << 20) % quantum:
        return (f"{name}: the MSCCL++ executor runs this plan only at message sizes that are "
                f"{size_rule(plan)} ({plan_chunks(plan)}), so at no power of two such as 1 MiB"
                f"{instead} (a size must be a multiple of buffer_alignment x chunks; "
                f"checkMessageSize in MSCCL++'s execution_plan.cc)")
    return (f"{name}: the MSCCL++ executor runs this plan only at message sizes from "
            f"{plan.min_message_size} to {plan.max_message_size} B")
