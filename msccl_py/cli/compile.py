"""``msccl-py compile``: a program file (or a library program by name) to MSCCL XML or an MSCCL++ plan."""

from __future__ import annotations

import argparse
import os
import sys

from msccl_py.cli import add_command
from msccl_py.errors import MscclError, ProgramError


def register(subparsers) -> None:
    p = add_command(subparsers, "compile",
                    "Run an MSCCLang program file (or compile a library program by name) and "
                    "write its MSCCL XML.")
    p.add_argument("-o", "--output", metavar="OUT.xml",
                   help="write the XML here (default, or -: standard output)")
    p.add_argument("--target", choices=_targets(), default=None,
                   help="runtime dialect (default: msccl-executor; custom collectives: msccl), or "
                        "mscclpp for an MSCCL++ JSON execution plan")
    p.add_argument("--gpus-per-node", type=int, default=None, metavar="N",
                   help="with --target mscclpp: ranks per node (memory channels within a node, port "
                        "channels between nodes; default: one node)")
    p.add_argument("--force", action="store_true",
                   help="write the XML even when the result is not the declared "
                        "collective's (with a warning)")
    p.add_argument("program", metavar="PROGRAM.py|NAME",
                   help="a program file, or the name of a library program (see `msccl-py list`)")
    p.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS",
                   help="the program's own arguments; for a library NAME: --ranks N "
                        "[--param k=v ...] [--instances I] [--protocol P] [-o OUT.xml]")
    p.set_defaults(func=run)


MSCCLPP = "mscclpp"


def _targets() -> list[str]:
    from msccl_py.targets.msccl.dialects import DIALECTS
    return sorted(DIALECTS) + [MSCCLPP]


def _library_args(args: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="msccl-py compile NAME", add_help=False)
    p.add_argument("--ranks", type=int, required=True)
    p.add_argument("--param", action="append", default=[], metavar="K=V")
    p.add_argument("--instances", type=int, default=1)
    p.add_argument("--protocol", default=None)
    p.add_argument("-o", "--output", default=None)
    p.add_argument("--target", choices=_targets(), default=None)
    p.add_argument("--force", action="store_true")
    p.add_argument("--gpus-per-node", type=int, default=None)
    try:
        ns, rest = p.parse_known_args(args)
    except SystemExit:
        raise ProgramError("library programs take --ranks N [--param k=v ...] "
                           "[--instances I] [--protocol P] [--target T] [--gpus-per-node N] "
                           "[-o OUT.xml]") from None
    if rest:
        raise ProgramError(f"unexpected arguments for a library program: {' '.join(rest)}")
    return ns


def run(args: argparse.Namespace) -> int:
    if os.path.isfile(args.program) or args.program.endswith(".py"):
        texts, algs = _compile_file(args)
    else:
        lib = _library_args(args.args)
        args.output = lib.output or args.output
        args.target = lib.target or args.target
        if lib.gpus_per_node is not None:
            args.gpus_per_node = lib.gpus_per_node
        from msccl_py import library
        params = library.parse_param_values(args.program, lib.param)
        kwargs = dict(params, instances=lib.instances)
        if lib.protocol:
            kwargs["protocol"] = lib.protocol
        if args.target == MSCCLPP:
            if args.gpus_per_node is None and any(
                    q.name == "gpus_per_node" for q in library.get(args.program).params):
                # a hierarchical program's own node layout decides memory vs port channels
                args.gpus_per_node = library.default_split(lib.ranks, params.get("gpus_per_node"))[1]
            return _write_fitted_plan(args, lib.ranks, kwargs)
        texts = [library.compile_xml(args.program, lib.ranks, target=args.target, **kwargs)]
        algs = []
    if args.target == MSCCLPP:
        return _write_plans(args, algs)
    if args.output == "-":
        args.output = None
    _write(args.output, texts)
    if args.output:
        from msccl_py.targets.msccl import read_xml, summary
        alg = algs[0] if algs else read_xml(texts[0])
        print(f"wrote {args.output}: {summary(alg).splitlines()[0]}", file=sys.stderr)
    return 0


def _compile_file(args):
    from msccl_py.language.runner import run_program
    outcome = run_program(args.program, args.args, None if args.target == MSCCLPP else args.target,
                          force=args.force)
    if outcome.check_failed and not args.force:
        # XML() passed, so a Check() before the program's last operations failed
        exc = ProgramError("a Check() failed; no XML written (--force writes it anyway)",
                           args.program)
        exc.details = tuple(line for p in outcome.programs for line in p.check_report)
        raise exc
    if not outcome.results:
        raise ProgramError("the program produced no XML (it never called XML())", args.program)
    if args.output and len(outcome.results) > 1:
        raise ProgramError(f"the program called XML() {len(outcome.results)} times; an XML "
                           f"file holds one algorithm (omit -o to print them all)",
                           args.program)
    return [r.xml for r in outcome.results], [r.algorithm for r in outcome.results]


def _write_plans(args: argparse.Namespace, algs, emitted=None, notes=()) -> int:
    """Lower each algorithm to an MSCCL++ plan, verify it, and write it (refused unless it verifies ok).

    ``emitted``: plans already emitted from ``algs``; ``notes``: lines for stderr."""
    if args.output == "-":
        args.output = None
    if args.gpus_per_node is not None and args.gpus_per_node < 1:
        raise ProgramError(f"--gpus-per-node must be at least 1, not {args.gpus_per_node}")
    if args.output and len(algs) > 1:
        raise ProgramError(f"the program called XML() {len(algs)} times; a plan file holds one "
                           f"algorithm (omit -o to print them all)", args.program)
    from msccl_py.targets.mscclpp.overview import summary
    from msccl_py.targets.mscclpp.geometry import runs_powers_of_two
    from msccl_py.targets.mscclpp.emit import emit
    plans = emitted or [emit(alg, args.gpus_per_node) for alg in algs]
    _write(args.output, [text for _, text, _ in plans])
    notes = list(notes) or [_sizes_note(alg.name, plan) for alg, (plan, _, _) in zip(algs, plans)
                            if not runs_powers_of_two(plan)]
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    if args.output:
        plan, _, verdict = plans[0]
        print(f"wrote {args.output}: {summary(plan).splitlines()[0]}; verified: {verdict}",
              file=sys.stderr)
    return 0


def _sizes_note(name: str, plan, instead: str = "") -> str:
    from msccl_py.targets.mscclpp.geometry import message_quantum, size_rule
    return (f"{name}: the MSCCL++ executor runs this plan only at message sizes that are "
            f"{size_rule(plan)} ({_chunks(plan)}), so at no power of two such as 1 MiB"
            f"{instead} (a size must be a multiple of buffer_alignment x chunks; "
            f"checkMessageSize in MSCCL++'s execution_plan.cc)"
            if message_quantum(plan) > 1 << 20 or (1 << 20) % message_quantum(plan) else
            f"{name}: the MSCCL++ executor runs this plan only at message sizes from "
            f"{plan.min_message_size} to {plan.max_message_size} B")


def _chunks(plan) -> str:
    g = plan.gpus[0]
    return (f"{g.input_chunks} input and {g.output_chunks} output chunks" if g.input_chunks != g.output_chunks
            else f"{g.input_chunks} chunks")


def _write_fitted_plan(args: argparse.Namespace, ranks: int, kwargs: dict) -> int:
    """:func:`_write_plans` for a library program.

    A program's ``spread`` parameter (e.g. ``channels``), left unset, grows
    until each threadblock's steps fit the executor's operations, as XML
    targets' step limits do (longer threadblocks would be cut into segments
    that run one after another). When the plan's chunk count lets no
    power-of-two message size through the executor's size rule, the
    program's ``chunking`` (or unset ``spread``) parameter, when the user left
    it unset, moves to the nearest value that does, and a note says so.
    """
    from msccl_py import library
    from msccl_py.library.build import fitted_values, wider_spread
    from msccl_py.targets.mscclpp.geometry import runs_powers_of_two
    from msccl_py.targets.mscclpp.emit import MAX_STEPS_PER_TB, emit, longest_threadblock
    spec = library.get(args.program)
    params = dict(kwargs)
    while True:
        alg = library.compile(args.program, ranks, **params)
        auto = spec.spread is not None and spec.spread not in kwargs
        wider = wider_spread(spec, ranks, fitted_values(args.program, ranks, **params),
                             longest_threadblock(alg), MAX_STEPS_PER_TB) if auto else None
        if wider is None:
            break
        params[spec.spread] = wider
    emitted = emit(alg, args.gpus_per_node)
    if runs_powers_of_two(emitted[0]):
        return _write_plans(args, [alg], [emitted])
    knob = spec.chunking if spec.chunking is not None else spec.spread
    natural = params.get(knob) if knob is not None else None
    if knob is not None and natural is None:
        natural = alg.nchannels // params.get("instances", 1)
    better = _nearest_count(spec, ranks, params, knob, natural, emitted[0], args.gpus_per_node)
    if better is None or knob in kwargs:
        hint = f"; --param {knob}={better[0]} would run at every power of two from 1 MiB" if better else ""
        return _write_plans(args, [alg], [emitted], [_sizes_note(args.program, emitted[0], hint)])
    value, alg, plan = better
    from msccl_py.targets.mscclpp.geometry import message_quantum
    note = (f"{args.program}: {knob}={natural} cuts each buffer into {_chunks(emitted[0])}, and the MSCCL++ "
            f"executor runs such a plan only at message sizes that are multiples of "
            f"{message_quantum(emitted[0])} B, so at no power of two; using {knob}={value} instead "
            f"({_chunks(plan[0])}: every power of two from {max(message_quantum(plan[0]), 1)} B up); "
            f"pass --param {knob}={natural} to keep {natural}")
    return _write_plans(args, [alg], [plan], [note])


def _nearest_count(spec, ranks: int, params: dict, knob, natural, plan, gpus_per_node):
    """(value, algorithm, emitted plan) for the value of ``knob`` nearest ``natural`` whose plan the
    executor runs at every power of two from 1 MiB, or None. Chunk counts grow in proportion
    to ``knob``, which rules most values out before they are built."""
    if knob is None or not natural:
        return None
    from msccl_py import library
    from msccl_py.errors import MscclError
    from msccl_py.targets.mscclpp.geometry import message_quantum, runs_powers_of_two
    from msccl_py.targets.mscclpp.emit import emit, lower
    p = spec.param(knob)
    quantum = message_quantum(plan)
    low, high = p.low or 1, p.high or 2 * natural
    for value in sorted(range(low, high + 1), key=lambda v: (abs(v - natural), -v)):
        scaled = quantum * value
        if value == natural or scaled % natural or (1 << 20) % (scaled // natural) \
                or spec.unsupported(ranks, {**params, knob: value}) is not None:
            continue
        try:
            alg = library.compile(spec.name, ranks, **{**params, knob: value})
            if not runs_powers_of_two(lower(alg, gpus_per_node)):
                continue
            return value, alg, emit(alg, gpus_per_node)
        except MscclError:
            continue
    return None


def _write(path: str | None, texts: list[str]) -> None:
    if path is None:
        for text in texts:
            sys.stdout.write(text)
        sys.stdout.flush()
        return
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "w") as f:
            f.write(texts[0])
        os.replace(tmp, path)
    except OSError as exc:
        raise MscclError(f"cannot write {path}: {exc.strerror}") from None
