"""``msccl-py verify/info`` on an MSCCL++ JSON plan (those commands dispatch here by content).

Output and exit codes match the XML commands: ``verify`` prints the verdict
line and one line per finding (exit 0 ok, 1 incorrect/deadlock/race, 2
invalid); ``info`` prints a summary. ``run`` times a plan with the XML's
timing and checks (:mod:`msccl_py.cli.run`).

>>> from msccl_py.cli import main
>>> main(["verify", "tests/data/mscclpp/single_node/allreduce_4.json"])   # doctest: +SKIP
ok: allreduce postcondition holds; no deadlock or race at 2048 B
0
"""

from __future__ import annotations

from msccl_py.errors import MscclRuntimeError
from msccl_py.targets.mscclpp.overview import summary
from msccl_py.targets.mscclpp.read import read_plan

EXIT = {"ok": 0, "incorrect": 1, "deadlock": 1, "race": 1, "invalid": 2}


def no_xml_options(args, names: tuple[str, ...]) -> None:
    """Refuse the XML-only options ``names`` that were given for a plan."""
    for name in names:
        value = getattr(args, name, None)
        if value not in (None, False, 0, [], ()):
            raise MscclRuntimeError(f"--{name.replace('_', '-')} applies to MSCCL XML, not to "
                                    f"MSCCL++ plans")


def verify_command(args) -> int:
    from msccl_py.verify.mscclpp.plan_check import verify_plan
    from msccl_py.plan.sizes import parse_size
    no_xml_options(args, ("target", "buffsize"))
    plan = read_plan(args.file)
    verdict = verify_plan(plan, parse_size(args.bytes) if args.bytes else None)
    print(verdict.report())
    return EXIT[verdict.status]


def info_command(args) -> int:
    print(summary(read_plan(args.file)))
    return 0
