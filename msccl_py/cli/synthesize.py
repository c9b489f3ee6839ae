"""``msccl-py synthesize``: a schedule for a machine, written as a program, XML or MSCCL++ plan.

The output's extension picks the form: ``.py`` a readable MSCCLang program
(compile it like any other), ``.xml`` MSCCL XML (``--target``'s dialect),
``.json`` an MSCCL++ execution plan. Every form is verified before it is
written. See docs/synthesis.md.
"""

from __future__ import annotations

import os
import sys

from msccl_py.cli import add_command
from msccl_py.errors import MscclError

FORMS = (".py", ".xml", ".json")


def register(subparsers) -> None:
    p = add_command(subparsers, "synthesize")
    p.add_argument("--collective", required=True,
                   choices=["allgather", "reduce_scatter", "allreduce", "alltoall"])
    p.add_argument("--topology", required=True, metavar="T",
                   help="machine: a topology name (see `msccl-py topology list`) or .topo file")
    p.add_argument("--nodes", type=int, default=None, metavar="K",
                   help="K copies of the machine joined by its NICs")
    p.add_argument("--for", dest="objective", default="bandwidth", metavar="GOAL",
                   help="bandwidth (judged at 1 GiB, the default), latency (at 1 KiB) or a "
                        "size such as 64MiB (the fastest at that size)")
    p.add_argument("-o", "--output", required=True, metavar="OUT",
                   help="OUT.py (program), OUT.xml (MSCCL XML) or OUT.json (MSCCL++ plan)")
    p.add_argument("--target", default=None, choices=_dialects(),
                   help="XML dialect the schedule must fit and .xml is written in "
                        "(default: msccl-executor)")
    p.add_argument("--gpus-per-node", type=int, default=None, metavar="N",
                   help="with .json: ranks per node (default: the machine's GPUs)")
    p.set_defaults(func=run)


def _dialects() -> list[str]:
    from msccl_py.targets.msccl.dialects import DIALECTS
    return sorted(DIALECTS)


def run(args) -> int:
    from msccl_py.plan.sizes import format_size
    from msccl_py.synthesis import synthesize
    from msccl_py.targets.msccl.dialects import DEFAULT_TARGET, get_dialect
    from msccl_py.tuning.nccl_sim import nccl_time
    ext = os.path.splitext(args.output)[1].lower()
    if ext not in FORMS:
        raise MscclError(f"{args.output}: the output's extension says what to write: .py "
                         f"(program), .xml (MSCCL XML) or .json (MSCCL++ plan)")
    if args.nodes is not None and args.nodes < 1:
        raise MscclError(f"--nodes must be at least 1, not {args.nodes}")
    target = get_dialect(args.target or DEFAULT_TARGET).name
    objective = args.objective
    if objective not in ("bandwidth", "latency"):
        from msccl_py.plan.sizes import parse_size
        objective = parse_size(objective)
    s = synthesize(args.topology, args.collective, nodes=args.nodes, objective=objective,
                   target=target, nccl_time=nccl_time(args.topology, args.collective, args.nodes))
    xml = s.xml(target)          # verifies the program's lowering, whatever is written
    if ext == ".py":
        text = s.source
    elif ext == ".xml":
        text = xml
    else:
        from msccl_py.toolchain.mscclpp_plan import emit
        per_node = args.gpus_per_node or _gpus_per_node(args)
        text = emit(s.algorithm, per_node)[1]
    _write(args.output, text)
    c = s.chosen
    line = (f"wrote {args.output}: {args.collective} on {s.machine}, {c.label}, {c.protocol}, "
            f"{c.instances} instance{'s' if c.instances > 1 else ''}; "
            f"{s.algbw_GBps:.2f} GB/s algbw at {format_size(s.nbytes)}")
    if s.bound is not None:
        line += (f" ({s.algbw_GBps / s.bound.algbw_GBps:.1%} of the bound "
                 f"{s.bound.algbw_GBps:.2f})")
    chunks = s.algorithm.nchunksperloop   # MSCCL's size rule: the element count divides
    line += (f"; {chunks} chunks per loop: MSCCL runs float32 calls that are multiples of "
             f"{format_size(4 * chunks)}")
    print(line + f"; solved in {s.solve_s:.1f} s", file=sys.stderr)
    print(versus_nccl(args.topology, args.collective, args.nodes, s.nbytes,
                      s.nbytes / (s.algbw_GBps * 1e3)), file=sys.stderr)
    return 0


def versus_nccl(topology: str, collective: str, nodes: int | None, nbytes: int,
                time_us: float) -> str:
    """The synthesized schedule against what NCCL itself runs at that size (``simulate
    nccl``), saying which is faster."""
    from msccl_py.plan.sizes import format_size
    from msccl_py.tuning.nccl import simulate_nccl
    try:
        r, = simulate_nccl(topology, collective, [nbytes], nodes=nodes or 1)
    except MscclError as exc:
        return f"no comparison with NCCL's own choice: {exc}"
    runs = f"{r.algorithm}/{r.protocol} x{r.channels}"
    if r.time_us < time_us:
        return (f"NCCL's own choice ({runs}) is faster at {format_size(nbytes)}: "
                f"{r.time_us:.1f} us against {time_us:.1f} us ({time_us / r.time_us:.2f}x): "
                f"leave that size to NCCL")
    return (f"{r.time_us / time_us:.2f}x faster than NCCL's own choice ({runs}, "
            f"{r.time_us:.1f} us) at {format_size(nbytes)}")


def _gpus_per_node(args) -> int | None:
    from msccl_py.topologies import load
    topo = load(args.topology, nodes=args.nodes)
    return topo.gpus_per_node if topo.num_machines > 1 else None


def _write(path: str, text: str) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        raise MscclError(f"cannot write {path}: {exc.strerror}") from None
