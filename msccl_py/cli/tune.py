"""``msccl-py tune``: the fastest algorithm per size range, written as an MSCCL_ALGO_DIR."""

from __future__ import annotations

import argparse

from msccl_py.cli import add_command
from msccl_py.errors import MscclError
from msccl_py.progress import Progress
from msccl_py.tuning.selection import ITEMSIZE


def _ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a comma list of integers, got {text!r}")
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def register(subparsers) -> None:
    p = add_command(subparsers, "tune")
    p.add_argument("--collective", required=True,
                   choices=("allreduce", "allgather", "reduce_scatter", "alltoall"),
                   help="the collective to tune")
    p.add_argument("--topology", required=True, metavar="T", help="machine name or .topo file")
    p.add_argument("--nodes", type=int, default=None, metavar="K",
                   help="copies of the machine (a cluster)")
    p.add_argument("--layout", default=None, metavar="HxR",
                   help="a launch's layout, as msccl_py.init() reports it (MSCCL_PY_DEBUG=INFO): "
                        "H copies of the machine, each running R ranks on its first R GPUs")
    p.add_argument("--ranks", type=int, default=None, metavar="N",
                   help="rank count (default: the topology's GPUs)")
    p.add_argument("-o", "--output", required=True, metavar="DIR",
                   help="algorithm directory to write (created if missing)")
    p.add_argument("--candidates", default=None, metavar="DIR",
                   help="also the XML files of DIR, besides the library programs")
    p.add_argument("--only-candidates", action="store_true",
                   help="only the XML files of --candidates DIR, no library programs")
    p.add_argument("--programs", default=None, metavar="A,B",
                   help="only these library programs (default: all for the collective); "
                        "with --candidates, these and DIR's files")
    p.add_argument("--sizes", default="1KiB:4GiB", metavar="SPEC",
                   help="sample sizes, a comma list or LO:HI doubling (default 1KiB:4GiB)")
    p.add_argument("--instances", type=_ints, default=(1, 2, 4), metavar="I,J",
                   help="instance counts to try (default 1,2,4)")
    p.add_argument("--channels", type=_ints, default=(1, 2, 4, 8, 16), metavar="C,D",
                   help="channel counts to try for programs that have them (default 1,2,4,8,16)")
    p.add_argument("--synthesize", action="store_true",
                   help="also the schedules `msccl-py synthesize` builds for the machine (its "
                        "bandwidth and latency schedules; needs HiGHS, the synth extra)")
    p.add_argument("--target", choices=("msccl", "msccl-executor", "rccl"),
                   default="msccl-executor",
                   help="runtime to write for: its XML dialect and size rule (default "
                        "msccl-executor)")
    p.add_argument("--dtype", choices=tuple(ITEMSIZE), default="float32",
                   help="element type of the calls, for the sizes each file's chunk count takes "
                        "(default float32)")
    p.add_argument("--nccl-tuner-conf", default=None, metavar="FILE",
                   help="also write NCCL's example tuner plugin CSV (NCCL_TUNER_CONFIG_FILE): "
                        "at every size the fastest of NCCL's own algorithms and protocols as "
                        "simulate nccl predicts them, for plain-NCCL runs")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from msccl_py.tuning.report import load_line, table
    from msccl_py.tuning.tune import REPORT, tune

    from msccl_py.cli.simulate import layout_of   # (cli imports cli: same layer)
    programs = args.programs.split(",") if args.programs else None
    nodes, per = layout_of(args)
    # a line with the elapsed time on a terminal: compiling and simulating every
    # candidate takes a while (the Progress is also a callback tune could report steps to)
    with Progress(f"tune {args.collective} on {args.topology}", ticker=True):
        result = tune(args.collective, args.topology, args.output, nodes=nodes,
                      gpus_per_node=per, ranks=args.ranks, candidates_dir=args.candidates, programs=programs,
                      sizes=args.sizes, instances=args.instances, channels=args.channels,
                      target=args.target, dtype=args.dtype, synthesize=args.synthesize,
                      only_candidates=args.only_candidates)
    print(table(result))
    print(f"\n{len(result.candidates)} candidates; wrote {len(result.files)} XML files to "
          f"{args.output} and the table to {args.output}/{REPORT}/tune.txt; load with "
          f"{load_line(result)}")
    for note in result.skipped:
        print(f"  skipped: {note}")
    if args.nccl_tuner_conf:
        _tuner_conf(args, nodes, result)
    return 0


def _tuner_conf(args, nodes, result) -> None:
    """Write NCCL's tuner CSV, and say (also in the report) where it differs from NCCL."""
    from msccl_py.tuning.nccl_tuner import differences, tuner_rules, write_conf
    from msccl_py.tuning.tune import REPORT
    if args.layout:
        raise MscclError("--nccl-tuner-conf describes whole machines; drop --layout")
    rules = tuner_rules(args.topology, args.collective, nodes=nodes or 1,
                        sizes=f"1:{max(result.sizes)}")
    title = (f"msccl-py tune --collective {args.collective} --topology {args.topology}"
             + (f" --nodes {nodes}" if nodes else ""))
    write_conf(args.nccl_tuner_conf, rules, title)
    diff = differences(rules)
    text = [f"wrote {args.nccl_tuner_conf}: {len(rules)} rules for NCCL's tuner plugin "
            f"(NCCL_TUNER_CONFIG_FILE)"]
    text += ([f"  differs from NCCL's own choice {d}" for d in diff] if diff else
             ["  it matches NCCL's own choice at every size"])
    print("\n".join(text))
    report = result.out_dir / REPORT / "tune.txt"
    report.write_text(report.read_text() + "\n" + "\n".join(text) + "\n")
