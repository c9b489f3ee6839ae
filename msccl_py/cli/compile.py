"""``msccl-py compile``: a program file (or a library program by name) to MSCCL XML or an MSCCL++ plan."""

from __future__ import annotations

import argparse
import os
import sys

from msccl_py.cli import add_command, say_notes
from msccl_py.errors import MscclError, ProgramError


def register(subparsers) -> None:
    p = add_command(subparsers, "compile", bounded=True)
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
    from msccl_py import toolchain
    if os.path.isfile(args.program) or args.program.endswith(".py"):
        arts = _compile_file(args)
        if args.target == MSCCLPP:
            _plan_options(args, len(arts))
            plan = toolchain.Policy(gpus_per_node=args.gpus_per_node)
            return _write_plans(args, [toolchain.compile(a.algorithm, MSCCLPP, plan)
                                       for a in arts])
        texts, algs = [a.text for a in arts], [a.algorithm for a in arts]
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
            from msccl_py.library.build import plan_artifact
            art = plan_artifact(args.program, lib.ranks, args.gpus_per_node, **kwargs)
            _plan_options(args, 1)
            return _write_plans(args, [art])
        from msccl_py.library.build import xml_artifact
        from msccl_py.progress import Progress
        _announce_size(args.program, lib.ranks, args.target, kwargs)
        with Progress(f"compile {args.program} on {lib.ranks} ranks", ticker=True):
            art = xml_artifact(args.program, lib.ranks, target=args.target, **kwargs)
        say_notes(art)
        # a fresh compile has its IR at hand (a cache hit has only the text): no reading back
        texts, algs = [art.text], [art.algorithm] if art.algorithm is not None else []
    if args.output == "-":
        args.output = None
    _write(args.output, texts)
    if args.output:
        from msccl_py.targets.msccl import read_xml
        from msccl_py.targets.msccl.overview import headline
        alg = algs[0] if algs else read_xml(texts[0])
        print(f"wrote {args.output}: {headline(alg)}", file=sys.stderr)
    return 0


#: XML past this many bytes is announced before its compile starts (a size nobody asked for)
LARGE_XML = 64 * 10**6
#: the rank counts the estimate compiles first (small: quick, and cached)
PROBE_RANKS = (8, 16)


def estimate_xml_bytes(name: str, ranks: int, target: str | None, kwargs: dict) -> int | None:
    """About how many bytes of XML library program ``name`` writes on ``ranks`` ranks: its
    XML on 8 and 16 ranks, grown as the power of the rank count those two follow (a ring's
    steps grow as n^2); None when the program does not compile on those."""
    import math

    from msccl_py.errors import MscclError
    from msccl_py.library.build import xml_artifact
    if ranks <= PROBE_RANKS[-1]:
        return None
    small = []
    for n in PROBE_RANKS:
        try:
            small.append(len(xml_artifact(name, n, target=target, **kwargs).text))
        except MscclError:
            return None
    power = math.log(small[1] / small[0]) / math.log(PROBE_RANKS[1] / PROBE_RANKS[0])
    return int(small[1] * (ranks / PROBE_RANKS[1]) ** max(power, 1.0))


def _announce_size(name: str, ranks: int, target: str | None, kwargs: dict) -> None:
    """A warning on stderr before a compile whose XML will pass :data:`LARGE_XML`."""
    size = estimate_xml_bytes(name, ranks, target, kwargs)
    if size is not None and size > LARGE_XML:
        print(f"warning: {name} on {ranks} ranks will write about {size / 1e6:.0f} MB of XML "
              f"(estimated from its XML on {PROBE_RANKS[0]} and {PROBE_RANKS[1]} ranks); "
              f"compiling, Ctrl-C to stop", file=sys.stderr, flush=True)


def _compile_file(args) -> list:
    from msccl_py import toolchain
    cap = toolchain.run_program_file(args.program, args.args,
                                     None if args.target == MSCCLPP else args.target,
                                     args.force, say_notes)
    if cap.check_failed and not args.force:
        # XML() passed, so a Check() before the program's last operations failed
        exc = ProgramError("a Check() failed; no XML written (--force writes it anyway)",
                           args.program)
        exc.details = tuple(line for log in cap.logs for line in log.report)
        raise exc
    if not cap.artifacts:
        raise ProgramError("the program produced no XML (it never called XML())", args.program)
    if args.output and len(cap.artifacts) > 1:
        raise ProgramError(f"the program called XML() {len(cap.artifacts)} times; an XML "
                           f"file holds one algorithm (omit -o to print them all)",
                           args.program)
    return cap.artifacts


def _plan_options(args: argparse.Namespace, count: int) -> None:
    """The plan options that cannot work, refused before any plan is written."""
    if args.output == "-":
        args.output = None
    if args.gpus_per_node is not None and args.gpus_per_node < 1:
        raise ProgramError(f"--gpus-per-node must be at least 1, not {args.gpus_per_node}")
    if args.output and count > 1:
        raise ProgramError(f"the program called XML() {count} times; a plan file holds one "
                           f"algorithm (omit -o to print them all)", args.program)


def _write_plans(args: argparse.Namespace, arts: list) -> int:
    """Write the verified MSCCL++ plans, then their notes and (with -o) what was written."""
    _write(args.output, [art.text for art in arts])
    for art in arts:
        say_notes(art)
    if args.output:
        from msccl_py.cli.plans import summary
        art = arts[0]
        print(f"wrote {args.output}: {summary(art.plan).splitlines()[0]}; verified: "
              f"{art.verdict}", file=sys.stderr)
    return 0


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
