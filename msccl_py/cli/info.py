"""``msccl-py info``: a short summary of an MSCCL XML file."""

from __future__ import annotations

import argparse

from msccl_py.cli import add_command, check_input


def register(subparsers) -> None:
    p = add_command(subparsers, "info", bounded=True)
    p.add_argument("file", metavar="FILE.xml")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from msccl_py.targets.mscclpp.read import is_plan_file
    if is_plan_file(args.file):      # an MSCCL++ JSON plan, told apart by content
        from msccl_py.cli.plans import info_command
        return info_command(args)
    import sys

    from msccl_py.cli.verify import read_bytes
    from msccl_py.targets.msccl import read_xml, summary
    from msccl_py.targets.msccl.dialects import DIALECTS
    from msccl_py.targets.msccl.names import algo_attributes, check_names, not_loaded_by
    check_input(args.file, "info")
    data = read_bytes(args.file)
    for note in check_names(data, args.file):
        print(note, file=sys.stderr)
    alg = read_xml(args.file)
    attributes = algo_attributes(data)
    refused = {name: reason for name in DIALECTS
               if (reason := not_loaded_by(attributes, name)) is not None}
    print(summary(alg, refused))
    return 0
