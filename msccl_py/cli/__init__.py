"""The ``msccl-py`` command.

Each subcommand lives in its own module of this package and exposes
``register(subparsers)``, which adds its parser and sets ``func`` (a callable
taking the parsed namespace and returning an exit code). ``main`` turns every
:class:`~msccl_py.errors.MscclError` into ``error: ...`` on stderr (its details on
the lines after) and exit 2;
``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
import traceback

from msccl_py.errors import MscclError, did_you_mean, error_report

#: subcommand -> the help ``msccl-py --help`` lists it with, in that order; each lives in
#: its own module of this package (``register(subparsers)``)
COMMANDS = {
    "compile": "Run an MSCCLang program file (or compile a library program by name) and write "
               "its MSCCL XML.",
    "info": "Summarise an MSCCL XML file: collective, ranks, protocol, channels, threadblocks "
            "and steps per GPU, chunks.",
    "verify": "verify an MSCCL XML file: data, deadlock per size regime, limits",
    "run": "run an XML file, MSCCL++ plan or MSCCLang program on random data and check it",
    "simulate": "Predict an algorithm's time per message size on a machine, and what limits it "
                "(the performance model).",
    "list": "list the programs of the algorithm library",
    "topology": "machine topologies: list, show (summary, matrix, drawing) and bound (the "
                "most any schedule of a collective can reach)",
    "calibrate": "Fit what the simulator reads from a machine file (per-protocol hop latency and "
                 "fixed cost, the threadblock limit, the links' bandwidth) to nccl-tests / "
                 "rccl-tests logs (text table or -Z csv) of NCCL's ring, write the calibrated "
                 "machine file, and show its residual per size.",
    "tune": "Simulate candidate algorithms (library programs x instances x protocols x channels, "
            "and XML files of your own) on a machine and write one XML per winning size range "
            "(near-ties within 2% merged), minBytes/maxBytes tiling all sizes under the target "
            "runtime's rule, in-place and out-of-place calls apart where their candidates "
            "differ, plus a table of what won where in DIR/report/.",
    "synthesize": "Synthesize a collective's schedule for a machine from its topology and write "
                  "it as an MSCCLang program (.py), MSCCL XML (.xml) or MSCCL++ plan (.json).",
}

#: every environment variable msccl_py reads -> what it does (``msccl-py --help``,
#: ``run --help`` and docs/cli.md list them; tests/cli/test_refusals.py keeps them whole)
ENVIRONMENT = {
    "MSCCL_PY_TIMEOUT": "seconds a collective of the shm runtime and the communicator may "
                        "make no progress before it fails as a deadlock (default 60)",
    "MSCCL_PY_PROGRESS": "0: no progress line on stderr; 1: show it on any stream",
    "MSCCL_PY_CACHE": "the compile cache and native builds (default ~/.cache/msccl_py)",
    "MSCCL_PY_CACHE_MAX": "the library cache's size cap (default 2GiB); the least recently "
                          "used entries go first",
    "MSCCL_PY_TOPOLOGY_PATH": "directories searched for machine files first (: between them)",
    "MSCCL_PY_PROGRAMS": "directories searched for library programs first (: between them)",
    "MSCCL_PY_SHM_EXECUTOR": "the shm runtime's executor: auto (default), native or python",
    "MSCCL_PY_DEBUG": "INFO: a launch's layout and each program chosen, on stderr; set for "
                      "a program file: full tracebacks",
    "MSCCL_PY_HOST": "a launched rank's host identity (ranks with equal values share memory)",
    "MSCCL_PY_ALGO_DIR": "an algorithm directory (as tune writes it) the communicator runs "
                         "first",
    "MSCCL_PY_ALGO_DIALECT": "the rule MSCCL_PY_ALGO_DIR's files are chosen by, when its "
                             "report does not say (default msccl-executor)",
}


def environment_help() -> str:
    """The environment variables as an argparse epilog."""
    import textwrap
    width = max(map(len, ENVIRONMENT))
    return "environment variables:\n" + "\n".join(
        textwrap.fill(text, 79, initial_indent=f"  {name:<{width}}  ",
                      subsequent_indent=" " * (width + 4)) for name, text in ENVIRONMENT.items())


def add_command(subparsers, name: str, help: str | None = None, *, bounded: bool = False,
                **kwargs) -> argparse.ArgumentParser:
    """Add subcommand ``name`` (``help``: its :data:`COMMANDS` line unless given); it accepts
    ``--debug`` after the command too.

    A ``bounded`` command does one piece of work whose objects live until it
    ends (compile, verify, info): it runs with the cyclic GC paused, which
    would only rescan them (a tenth of a 130k-step compile). Commands that
    run on (``run``, ``tune``, ...) keep it.
    """
    if help is None:
        help = COMMANDS[name]
    # argparse %-formats a help, not a description
    sub = subparsers.add_parser(name, help=help.replace("%", "%%"), description=help, **kwargs)
    sub.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                     help="show the Python traceback of an error")
    sub.set_defaults(bounded=bounded)
    return sub


def check_input(path: str, command: str) -> None:
    """Where ``command`` reads an XML file: say how to get one from a program or a name.

    A ``.py`` file is a program to compile first; a missing file named like a
    library program is that program (or a misspelling of one).
    """
    stem = os.path.splitext(os.path.basename(path))[0]
    runs = command == "run"
    if path.endswith(".py") and not runs:
        raise MscclError(f"{path} is an MSCCLang program, not XML: compile it first "
                         f"(msccl-py compile -o {stem}.xml {path}; then msccl-py {command} "
                         f"{stem}.xml)" + ("" if command == "info" else
                                           f", or msccl-py run {path} to compile, verify and "
                                           f"run it"))
    if os.path.exists(path) or os.path.splitext(path)[1]:
        return
    from msccl_py import library
    names = library.names()
    if path in names:
        raise MscclError(f"{path} is a library program, not a file: compile it first "
                         f"(msccl-py compile {path} --ranks N -o {path}.xml; then msccl-py "
                         f"{command} {path}.xml)")
    hint = did_you_mean(path, names)
    if hint:
        raise MscclError(f"no file {path}, and no library program of that name{hint}")


def say_notes(art) -> None:
    """Say a toolchain artifact's notes on stderr, one line each, as they arose."""
    for note in art.notes:
        print(note, file=sys.stderr)


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The ``msccl-py`` parser. Given the ``argv`` it will parse, only the command named
    there is built in full, the others listed by name and help, so a command imports its own
    module alone."""
    parser = argparse.ArgumentParser(
        prog="msccl-py",
        description="Compile, verify and run MSCCL collective algorithms.",
        epilog=environment_help(), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--debug", action="store_true",
                        help="show the Python traceback of an error")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = _command_of(argv)
    for name, help in COMMANDS.items():
        if chosen is not None and name != chosen:
            subparsers.add_parser(name, help=help.replace("%", "%%"),  # listed, never parsed
                                  description=help)
            continue
        try:
            module = importlib.import_module(f"msccl_py.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"msccl_py.cli.{name}":
                continue  # subcommand not built yet
            raise
        module.register(subparsers)
    return parser


def _command_of(argv: list[str] | None) -> str | None:
    """The command ``argv`` runs; None when that takes every parser to say (no argv, help
    asked before a command, or no known command)."""
    for token in argv or ():
        if token == "--debug":
            continue
        return token if token in COMMANDS else None
    return None


def main(argv: list[str] | None = None) -> int:
    # not list(): the cli.list submodule shadows the builtin in this module
    argv = sys.argv[1:] if argv is None else [*argv]
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    paused = getattr(args, "bounded", False) and gc.isenabled()
    if paused:
        gc.disable()
    try:
        return int(args.func(args) or 0)
    except MscclError as exc:
        if args.debug:
            traceback.print_exc()
        print(error_report(exc), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader (`| head`) went away: stop quietly, as Unix tools do
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 141
    finally:
        if paused:
            gc.enable()


if __name__ == "__main__":
    sys.exit(main())
