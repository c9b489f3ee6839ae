"""The command line every library program shares.

``python programs/<name>.py 8 --instances 2 --protocol LL --trees 2`` builds
the program, checks it against its collective and prints the XML. The rank
count is positional or ``--ranks``; each declared parameter becomes an
option (``gpus_per_node`` may also be given as a second positional).
Programs declared with ``@library_program`` end with
``sys.exit(name.main())``, which calls :func:`main`; a ``SPEC`` file with
``sys.exit(script.main(SPEC, build))``. :func:`ranks_parser` and
:func:`given_ranks` serve the programs that keep a command line of positional
counts (``allreduce_ring.py NUM_RANKS [CHANNELS] [INSTANCES]``).

>>> parser = ranks_parser("Demo.", ("instances", "instances"))
>>> given_ranks(parser, parser.parse_args(["--ranks", "4"]))
4
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable, Sequence

from msccl_py.errors import MscclError, ProgramError, error_report
from msccl_py.ir import PROTOCOLS
from msccl_py.library.spec import ProgramSpec


def parser_for(spec: ProgramSpec) -> argparse.ArgumentParser:
    """An argument parser with the common options and one option per parameter."""
    parser = argparse.ArgumentParser(prog=f"{spec.name}.py", description=spec.description)
    parser.add_argument("num_ranks", nargs="?", type=int, help="number of ranks")
    names = {p.name for p in spec.params}
    if "gpus_per_node" in names:
        parser.add_argument("gpus_per_node_pos", nargs="?", type=int, metavar="gpus_per_node",
                            help="GPUs per node (same as --gpus-per-node)")
    parser.add_argument("--ranks", type=int, help="number of ranks (instead of the positional)")
    parser.add_argument("--instances", type=int, default=1, help="replicas of the program")
    parser.add_argument("--protocol", choices=PROTOCOLS, default=spec.protocol,
                        help=f"NCCL protocol (default {spec.protocol})")
    parser.add_argument("--target", default=None,
                        help="XML dialect: msccl, msccl-executor or rccl (default: "
                             "msccl-executor, msccl for custom collectives)")
    for p in spec.params:
        parser.add_argument(f"--{p.name.replace('_', '-')}", dest=p.name, default=None,
                            metavar=p.type.__name__.upper(), help=f"{p.help} ({p.describe()})")
    return parser


def ranks_parser(doc: str, *counts: tuple[str, str]) -> argparse.ArgumentParser:
    """A parser described by ``doc``'s first line taking ``NUM_RANKS`` and then each of
    ``counts`` (name, help; default 1) as optional positionals, ``--ranks`` and ``--protocol``
    (default Simple)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("num_ranks", type=int, nargs="?", help="number of ranks")
    for name, text in counts:
        parser.add_argument(name, type=int, nargs="?", default=1, help=text)
    parser.add_argument("--ranks", type=int, help="number of ranks (instead of NUM_RANKS)")
    parser.add_argument("--protocol", default="Simple", choices=["Simple", "LL", "LL128"])
    return parser


def given_ranks(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """The rank count of ``args`` (``--ranks`` first); a usage error when neither is given."""
    n = args.ranks or args.num_ranks
    if n is None:
        parser.error("give NUM_RANKS or --ranks")
    return n


def main(spec: ProgramSpec, build: Callable, argv: Sequence[str] | None = None) -> int:
    """Parse ``argv``, build, check and print the program's XML; return the exit code."""
    from msccl_py.language import emit
    from msccl_py.library.fit import fit_program
    args = parser_for(spec).parse_args(argv)
    try:
        if args.num_ranks is not None and args.ranks is not None and args.num_ranks != args.ranks:
            raise ProgramError(f"rank count given twice: {args.num_ranks} and --ranks {args.ranks}")
        num_ranks = args.ranks if args.ranks is not None else args.num_ranks
        if num_ranks is None:
            raise ProgramError(f"{spec.name}: give the rank count (positional or --ranks)")
        given = {p.name: getattr(args, p.name) for p in spec.params
                 if getattr(args, p.name) is not None}
        positional = getattr(args, "gpus_per_node_pos", None)
        if positional is not None:
            given.setdefault("gpus_per_node", str(positional))
        values = spec.resolve(num_ranks, given, args.target)

        def make(values):
            prog = build(num_ranks, instances=args.instances, protocol=args.protocol, **values)
            if not prog.check():
                raise ProgramError(f"{spec.name} fails its collective's postcondition")
            return prog
        prog = fit_program(spec, num_ranks, values, args.target, make)[0]
        emit(prog, target=args.target)
    except MscclError as exc:
        print(error_report(exc), file=sys.stderr)
        return 2
    return 0
