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
    from msccl_py.xml_dialects import DIALECTS
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
        from msccl_py.xml import read_xml, summary
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


def _write_plans(args: argparse.Namespace, algs) -> int:
    """Lower each algorithm to an MSCCL++ plan, verify it, and write it (refused unless it verifies ok)."""
    if args.output == "-":
        args.output = None
    if args.gpus_per_node is not None and args.gpus_per_node < 1:
        raise ProgramError(f"--gpus-per-node must be at least 1, not {args.gpus_per_node}")
    if args.output and len(algs) > 1:
        raise ProgramError(f"the program called XML() {len(algs)} times; a plan file holds one "
                           f"algorithm (omit -o to print them all)", args.program)
    from msccl_py.mscclpp.commands import summary
    from msccl_py.mscclpp.lower import emit
    plans = [emit(alg, args.gpus_per_node) for alg in algs]
    _write(args.output, [text for _, text, _ in plans])
    if args.output:
        plan, _, verdict = plans[0]
        print(f"wrote {args.output}: {summary(plan).splitlines()[0]}; verified: {verdict}",
              file=sys.stderr)
    return 0


def _write_fitted_plan(args: argparse.Namespace, ranks: int, kwargs: dict) -> int:
    """:func:`_write_plans` for a library program. A plan whose threadblocks exceed the
    executor's operations is tried again with the program's ``spread`` parameter (e.g.
    ``channels``) wider, when the user left it unset, as XML targets' step limits are."""
    from msccl_py import library
    from msccl_py.errors import VerificationError
    from msccl_py.library.build import fitted_values, wider_spread
    from msccl_py.mscclpp.limits import TOO_MANY_OPERATIONS
    from msccl_py.mscclpp.lower import MAX_STEPS_PER_TB, longest_threadblock
    spec = library.get(args.program)
    auto = spec.spread is not None and spec.spread not in kwargs
    params = dict(kwargs)
    while True:
        alg = library.compile(args.program, ranks, **params)
        try:
            return _write_plans(args, [alg])
        except VerificationError as exc:
            if not auto or TOO_MANY_OPERATIONS not in str(exc):
                raise
            wider = wider_spread(spec, ranks, fitted_values(args.program, ranks, **params),
                                 longest_threadblock(alg), MAX_STEPS_PER_TB)
            if wider is None:
                raise
            params[spec.spread] = wider


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
