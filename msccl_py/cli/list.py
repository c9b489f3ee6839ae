"""``msccl-py list``: the programs of the algorithm library.

>>> from msccl_py.cli import main
>>> main(["list", "--names", "--collective", "barrier"])
barrier_dissemination
0
"""

from __future__ import annotations

import sys

from msccl_py.cli import add_command

COLUMNS = ("name", "collective", "ranks", "protocols", "sizes", "parameters")


def register(subparsers) -> None:
    sub = add_command(subparsers, "list",
                      epilog="ranks: supported rank counts; protocols: the ones each program "
                             "is meant for, default first; sizes: the per-rank input sizes "
                             "library.select picks it for; parameters: name=default[range] "
                             "(compile with --param name=value)")
    sub.add_argument("--names", action="store_true", help="print only the names, one per line")
    sub.add_argument("--collective", metavar="OP",
                     help="only programs for this collective (allreduce, barrier, ...)")
    sub.add_argument("-v", "--verbose", action="store_true",
                     help="add each program's description and file")
    sub.set_defaults(func=run)


def rows(collective: str | None = None) -> list[tuple[str, ...]]:
    """One row of strings per program, in :data:`COLUMNS` order."""
    from msccl_py import library
    out = []
    for spec in library.programs():
        if collective and spec.operation != collective:
            continue
        params = " ".join(p.describe() for p in spec.params) or "-"
        out.append((spec.name, spec.operation, spec.ranks_text, ",".join(spec.protocols),
                    spec.size_text, params))
    return out


def run(args) -> int:
    from msccl_py import library
    from msccl_py.errors import ProgramError
    if args.collective and args.collective not in library.OPERATIONS:
        raise ProgramError(f"unknown collective {args.collective!r}; use one of "
                           f"{', '.join(library.OPERATIONS)}")
    table = rows(args.collective)
    for path, reason in library.load_errors().items():
        print(f"warning: program file {path} did not load: {reason}", file=sys.stderr)
    if args.names:
        for row in table:
            print(row[0])
        return 0
    widths = [max(len(c), *(len(r[i]) for r in table)) if table else len(c)
              for i, c in enumerate(COLUMNS)]
    print("  ".join(c.ljust(w) for c, w in zip(COLUMNS, widths)).rstrip())
    specs = {s.name: s for s in library.programs()}
    for row in table:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())
        if args.verbose:
            spec = specs[row[0]]
            print(f"    {spec.description}")
            print(f"    {spec.source}")
    sys.stdout.flush()
    print(f"{len(table)} programs", file=sys.stderr)
    return 0
