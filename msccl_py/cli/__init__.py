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

#: subcommand modules, in the order ``--help`` lists them
COMMANDS = ("compile", "info", "verify", "run", "simulate", "list", "topology", "calibrate",
            "tune", "synthesize")


def add_command(subparsers, name: str, help: str, *, bounded: bool = False,
                **kwargs) -> argparse.ArgumentParser:
    """Add subcommand ``name``; it accepts ``--debug`` after the command too.

    A ``bounded`` command does one piece of work whose objects live until it
    ends (compile, verify, info): it runs with the cyclic GC paused, which
    would only rescan them (a tenth of a 130k-step compile). Commands that
    run on (``run``, ``tune``, ...) keep it.
    """
    sub = subparsers.add_parser(name, help=help, description=help, **kwargs)
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="msccl-py",
        description="Compile, verify and run MSCCL collective algorithms.")
    parser.add_argument("--debug", action="store_true",
                        help="show the Python traceback of an error")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"msccl_py.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"msccl_py.cli.{name}":
                continue  # subcommand not built yet
            raise
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    # not list(): the cli.list submodule shadows the builtin in this module
    argv = sys.argv[1:] if argv is None else [*argv]
    parser = build_parser()
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
