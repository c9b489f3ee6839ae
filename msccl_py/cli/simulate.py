"""``msccl-py simulate TARGET --topology T``: predicted time, algbw, busbw and bottleneck per size.

TARGET is an XML file, an MSCCLang program file (its first ``XML()``) or a
library program name (``--ranks``, default the machine's GPU count;
``--param``, ``--instances``, ``--protocol`` as in ``compile``). ``--compare``
adds more targets (files or names, compiled with the same ``--ranks``,
``--instances`` and ``--protocol``; ``--param`` applies to TARGET only) and
shows them side by side; ``--plot OUT.png`` draws busbw against size
(matplotlib, the ``plot`` extra). ``--json`` prints only JSON.
"""

from __future__ import annotations

import json
import os
import sys

from msccl_py.cli import add_command
from msccl_py.errors import MscclError, ProgramError

DEFAULT_SIZES = "1KiB:1GiB"


def register(subparsers) -> None:
    p = add_command(subparsers, "simulate",
                    "Predict an algorithm's time per message size on a machine, and what "
                    "limits it (the performance model).")
    p.add_argument("target", metavar="TARGET",
                   help="an MSCCL XML file, a program file, or a library program name")
    p.add_argument("--topology", required=True, metavar="T",
                   help="machine: a topology name (see `msccl-py topology list`) or .topo file")
    p.add_argument("--nodes", type=int, default=None, metavar="K",
                   help="K copies of the machine joined by its NICs")
    p.add_argument("--sizes", default=DEFAULT_SIZES, metavar="SPEC",
                   help=f"sizes as nccl-tests counts them: a comma list (1MiB,64MiB) or a range "
                        f"LO:HI doubling (default {DEFAULT_SIZES})")
    p.add_argument("--json", action="store_true",
                   help="print only a JSON list of {bytes, time_us, algbw_GBps, busbw_GBps, "
                        "bottleneck} (with --compare: one {target, results} per target)")
    p.add_argument("--trace", metavar="OUT.json",
                   help="write a Chrome trace-event file of TARGET at the largest size")
    p.add_argument("--compare", nargs="+", default=[], metavar="A",
                   help="more targets to show side by side")
    p.add_argument("--plot", metavar="OUT.png",
                   help="draw busbw against size of every target (needs matplotlib)")
    p.add_argument("--ranks", type=int, default=None,
                   help="library programs: rank count (default: the machine's GPUs)")
    p.add_argument("--param", action="append", default=[], metavar="K=V",
                   help="library program parameter of TARGET (repeatable)")
    p.add_argument("--instances", type=int, default=1, help="library programs: instances")
    p.add_argument("--protocol", default=None,
                   help="library programs: Simple, LL or LL128 (default: the program's)")
    p.set_defaults(func=run)


def load_target(target: str, ranks: int, params: list[str], instances: int,
                protocol: str | None):
    """(label, ir.Algorithm) of an XML file, a program file or a library program name."""
    if target.endswith(".xml") or (os.path.isfile(target) and not target.endswith(".py")):
        from msccl_py.xml import read_xml
        if not os.path.isfile(target):
            raise MscclError(f"no such XML file: {target}")
        return os.path.basename(target), read_xml(target)
    if target.endswith(".py") or os.path.isfile(target):
        from msccl_py.language.runner import run_program
        outcome = run_program(target, [], None)
        if not outcome.results:
            raise ProgramError("the program produced no XML (it never called XML())", target)
        return os.path.basename(target), outcome.results[0].algorithm
    from msccl_py import library
    values = library.parse_param_values(target, params)
    kwargs = dict(values, instances=instances)
    if protocol:
        kwargs["protocol"] = protocol
    label = target + "".join(f" {k}={v}" for k, v in values.items())
    return label, library.compile(target, ranks, **kwargs)


def run(args) -> int:
    from msccl_py.plan.sizes import format_size
    from msccl_py.simulate import machine_model, parse_sizes, simulate
    from msccl_py.topologies import load
    machine = machine_model(load(args.topology, nodes=args.nodes))
    ranks = args.ranks or machine.ngpus
    sizes = parse_sizes(args.sizes)
    targets = [load_target(args.target, ranks, args.param, args.instances, args.protocol)]
    targets += [load_target(t, ranks, [], args.instances, args.protocol) for t in args.compare]
    runs = []
    for i, (label, alg) in enumerate(targets):
        timings: list = []
        results = simulate(alg, machine, sizes, timings=timings)
        runs.append((label, alg, results))
        if i == 0 and args.trace:
            from msccl_py.simulate.trace import write_trace
            largest = max(range(len(sizes)), key=sizes.__getitem__)
            write_trace(args.trace, alg, machine, timings[largest])
    if args.plot:
        _plot(args.plot, runs, machine.name)
    if args.json:
        if len(runs) == 1:
            doc = [r.as_dict() for r in runs[0][2]]
        else:
            doc = [{"target": label, "results": [r.as_dict() for r in res]}
                   for label, _, res in runs]
        json.dump(doc, sys.stdout, indent=1)
        print()
        return 0
    title = f"on {machine.name} ({machine.ngpus} GPUs)"
    if len(runs) == 1:
        label, alg, results = runs[0]
        print(f"{label}: {alg.collective}, {alg.protocol}, {alg.ngpus} ranks, "
              f"{alg.nchannels} channels {title}")
        print(f"{'size':>10} {'time us':>12} {'algbw GB/s':>11} {'busbw GB/s':>11}  bottleneck")
        for r in results:
            print(f"{format_size(r.bytes):>10} {r.time_us:12.2f} {r.algbw_GBps:11.2f} "
                  f"{r.busbw_GBps:11.2f}  {r.bottleneck}")
    else:
        print(f"busbw GB/s (time us) {title}")
        for k, (label, alg, _) in enumerate(runs):
            print(f"  [{k}] {label}: {alg.collective}, {alg.protocol}, {alg.ngpus} ranks")
        print(f"{'size':>10} " + " ".join(f"{f'[{k}]':>20}" for k in range(len(runs)))
              + "  best")
        for j, nbytes in enumerate(sizes):
            cells = [res[j] for _, _, res in runs]
            best = min(range(len(cells)), key=lambda k: cells[k].time_us)
            print(f"{format_size(nbytes):>10} " + " ".join(
                f"{c.busbw_GBps:9.2f} ({c.time_us:8.1f})" for c in cells) + f"  [{best}]")
    if args.trace:
        print(f"wrote {args.trace}", file=sys.stderr)
    if args.plot:
        print(f"wrote {args.plot}", file=sys.stderr)
    return 0


def _plot(path: str, runs, machine: str) -> None:
    try:
        from matplotlib.figure import Figure
    except ImportError:
        from msccl_py.topologies.draw import PLOT_EXTRA
        raise MscclError(f"--plot needs matplotlib, which is not installed: "
                         f"{PLOT_EXTRA}") from None
    fig = Figure(figsize=(7, 4.5))
    ax = fig.add_subplot()
    for label, alg, results in runs:
        ax.plot([r.bytes for r in results], [r.busbw_GBps for r in results], marker="o",
                markersize=3, label=f"{label} ({alg.protocol})")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("size (bytes, nccl-tests)")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_title(f"predicted busbw on {machine}")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    try:
        fig.savefig(path, dpi=120, bbox_inches="tight")
    except OSError as exc:
        raise MscclError(f"cannot write {path}: {exc.strerror}") from None
