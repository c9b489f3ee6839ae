"""``msccl-py verify/info`` on an MSCCL++ JSON plan (the CLI dispatches here by content).

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

from collections import Counter

from msccl_py.errors import MscclRuntimeError
from msccl_py.mscclpp.ir import Plan
from msccl_py.mscclpp.read import read_plan

EXIT = {"ok": 0, "incorrect": 1, "deadlock": 1, "race": 1, "invalid": 2}


def no_xml_options(args, names: tuple[str, ...]) -> None:
    """Refuse the XML-only options ``names`` that were given for a plan."""
    for name in names:
        value = getattr(args, name, None)
        if value not in (None, False, 0, [], ()):
            raise MscclRuntimeError(f"--{name.replace('_', '-')} applies to MSCCL XML, not to "
                                    f"MSCCL++ plans")


def verify_command(args) -> int:
    from msccl_py.mscclpp.verify import verify_plan
    from msccl_py.plan.sizes import parse_size
    no_xml_options(args, ("target", "buffsize"))
    plan = read_plan(args.file)
    verdict = verify_plan(plan, parse_size(args.bytes) if args.bytes else None)
    print(verdict.report())
    return EXIT[verdict.status]


def info_command(args) -> int:
    print(summary(read_plan(args.file)))
    return 0


def summary(plan: Plan) -> str:
    """A few lines: collective, ranks, protocol, sizes, and per rank threadblocks, channels, operations."""
    # the executor's default maximum is the largest uint64: no bound at all
    hi = "unbounded" if plan.max_message_size >= 2**64 - 1 else f"{plan.max_message_size} B"
    lines = [f"{plan.name}: MSCCL++ plan, {plan.raw_collective} on {plan.nranks} ranks, {plan.protocol}, "
             f"{'in-place' if plan.inplace else 'out-of-place'}, message sizes "
             f"{plan.min_message_size} B .. {hi}"
             + (", double scratch buffer" if plan.double_scratch else "")
             + (", reuses resources" if plan.reuse_resources else "")]
    for g in plan.gpus:
        ops = Counter(op.name for tb in g.threadblocks for top in tb.ops for op in [top] + top.ops)
        lines.append(f"  rank {g.rank}: chunks i/o/s {g.input_chunks}/{g.output_chunks}/{g.scratch_chunks}, "
                     f"{len(g.threadblocks)} threadblocks, channels memory {len(g.memory_channels)} "
                     f"port {len(g.port_channels)} switch {len(g.switch_channels)}, ops "
                     + " ".join(f"{k}={v}" for k, v in sorted(ops.items())))
    return "\n".join(lines)
