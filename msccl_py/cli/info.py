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
    from msccl_py.targets.msccl import read_xml, summary
    check_input(args.file, "info")
    print(summary(read_xml(args.file)))
    return 0
