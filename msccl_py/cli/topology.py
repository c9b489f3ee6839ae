"""``msccl-py topology``: list the machine files, summarise or draw one, bound a collective.

>>> from msccl_py.cli import main
>>> main(["topology", "show", "dgx1"])   # doctest: +SKIP
dgx1: NVIDIA DGX-1 (8x V100, hybrid cube-mesh)
...
"""

from __future__ import annotations

from pathlib import Path

from msccl_py.cli import add_command


def register(subparsers) -> None:
    sub = add_command(subparsers, "topology")
    actions = sub.add_subparsers(dest="action", metavar="ACTION", required=True)
    lister = add_command(actions, "list", help="list the topology files on the search path")
    lister.add_argument("--names", action="store_true", help="print only the names")
    lister.set_defaults(func=run_list)
    show = add_command(actions, "show", help="summarise a topology (name, .topo file or "
                       "nvidia-smi output) and optionally draw it")
    _machine_argument(show)
    show.add_argument("--nodes", type=int, default=None, metavar="N",
                      help="compose N copies of the machine into a cluster")
    show.add_argument("--nvidia-smi", action="store_true",
                      help="FILE is `nvidia-smi topo -m` output (or '-' for stdin)")
    show.add_argument("--matrix", action="store_true",
                      help="also print the bandwidth matrix (rows: source, columns: destination)")
    show.add_argument("--png", metavar="OUT", type=Path,
                      help="draw the topology to this image file (needs matplotlib)")
    show.set_defaults(func=run_show)
    bound = add_command(actions, "bound", help="the bandwidth lower bound of a collective on a "
                        "machine: the least time any schedule takes, and the cut that sets it")
    _machine_argument(bound)
    bound.add_argument("--nodes", type=int, default=None, metavar="K",
                       help="K copies of the machine joined by its NICs")
    bound.add_argument("--collective", required=True,
                       choices=["allgather", "reduce_scatter", "allreduce", "alltoall"])
    bound.add_argument("--size", default="1GiB", metavar="SIZE",
                       help="size (nccl-tests' bytes) at which to print the least time "
                            "(default 1GiB)")
    bound.add_argument("--json", action="store_true",
                       help="print one JSON object: algbw_GBps, busbw_GBps, cut, ...")
    bound.set_defaults(func=run_bound)


def _machine_argument(parser) -> None:
    """The machine as a positional NAME|FILE or as ``--topology``, the spelling of
    simulate, tune and synthesize (users carry it over)."""
    parser.add_argument("topology", metavar="NAME|FILE", nargs="?")
    parser.add_argument("--topology", dest="topology_option", metavar="T",
                        help="the machine, as the positional NAME|FILE")


def _resolve_machine(args) -> None:
    from msccl_py.errors import MscclError
    if args.topology and args.topology_option and args.topology != args.topology_option:
        raise MscclError(f"two machines given: {args.topology!r} and --topology "
                         f"{args.topology_option!r}")
    args.topology = args.topology or args.topology_option
    if not args.topology:
        raise MscclError(f"topology {args.action}: name the machine (NAME|FILE or --topology)")


def run_list(args) -> int:
    from msccl_py.topologies import available, load
    found = available()
    if args.names:
        for name in found:
            print(name)
        return 0
    rows = [("name", "GPUs", "title", "file")]
    for name, path in found.items():
        topo = load(path)
        rows.append((name, str(topo.num_nodes()), topo.title, str(path)))
    _table(rows)
    return 0


def _load(args):
    from msccl_py.topologies import load, read_nvidia_smi
    if not args.nvidia_smi:
        return load(args.topology, nodes=args.nodes)
    import sys
    from msccl_py.errors import TopologyError
    if args.nodes not in (None, 1):
        raise TopologyError("--nodes does not apply to nvidia-smi output")
    if args.topology == "-":
        return read_nvidia_smi(sys.stdin.read(), file="<stdin>")
    try:
        from msccl_py.topologies.topofile import decode
        text = decode(Path(args.topology).read_bytes(), args.topology)
    except OSError as exc:
        raise TopologyError(f"cannot read {args.topology}: {exc.strerror}") from None
    return read_nvidia_smi(text, name=Path(args.topology).stem, file=args.topology)


def run_show(args) -> int:
    from msccl_py.topologies.analysis import summary
    _resolve_machine(args)
    topo = _load(args)
    s = summary(topo)
    unit = "GB/s" if s["unit"] == "GB/s" else "links"
    local, network = s["local_gbs_per_gpu"], s["network_gbs_per_gpu"]
    print(f"{s['name']}: {s['title']}")
    ranks = f"{s['ranks']}"
    if s["machines"] > 1:
        ranks += f" = {s['machines']} machines x {s['gpus_per_machine']}"
    hops = s["diameter"]
    rows = [
        ("GPUs (ranks)", ranks),
        ("point-to-point links", f"{s['direct_links']} directed GPU pairs"),
        ("switches / NICs", f"{s['switches']} / {s['nics']}"),
        ("in-machine bandwidth per GPU", f"{_span(local)} {unit} per direction"),
        ("network bandwidth per GPU", f"{_span(network)} GB/s per direction"
         if network[1] > 0 and unit == "GB/s" else "-"),
        ("bisection bandwidth", f"{s['bisection_gbs']:g} {unit} per direction"
         + ("" if s["bisection_exact"] else " (smallest of the aligned cuts tried)")),
        ("diameter", "disconnected" if hops is None
         else f"{hops} hop" + ("" if hops == 1 else "s")),
    ] + s["fabric"]
    if topo.network_kind is not None:
        rows.insert(5, ("network kind", _network(topo)))
    if topo.source:
        rows.append(("source", str(topo.source)))
    _table(rows, header=False)
    if args.matrix:
        _matrix(topo)
    if args.png is not None:
        from msccl_py.topologies.draw import draw
        print(f"wrote {draw(topo, args.png)}")
    return 0


def run_bound(args) -> int:
    _resolve_machine(args)
    from msccl_py.plan.sizes import format_size, parse_size
    from msccl_py.synthesis import bound
    nbytes = parse_size(args.size)
    if args.nodes is not None and args.nodes < 1:
        from msccl_py.errors import TopologyError
        raise TopologyError(f"--nodes must be at least 1, not {args.nodes}")
    b = bound(args.topology, args.collective, nodes=args.nodes)
    anyform = None
    if args.collective == "allreduce":   # the bound that overlapped phases cannot beat
        from msccl_py.synthesis.anyform import any_allreduce_bound
        anyform = any_allreduce_bound(args.topology, nodes=args.nodes)
    if args.json:
        import json
        d = b.as_dict(nbytes)
        if anyform is not None:
            d["any_form"] = {"algbw_GBps": anyform.algbw_GBps,
                             "busbw_GBps": anyform.busbw_GBps,
                             "time_us": anyform.time_us(nbytes), "method": anyform.method}
        print(json.dumps(d, indent=1))
        return 0
    print(f"{args.collective} on {b.machine} ({b.ranks} ranks)")
    rows = [("largest algbw", f"{b.algbw_GBps:.2f} GB/s"),
            ("largest busbw", f"{b.busbw_GBps:.2f} GB/s"),
            (f"least time at {format_size(nbytes)}", f"{b.time_us(nbytes):.2f} us")]
    for cut in b.cuts:
        phase = ({"egress": "allgather", "ingress": "reduce-scatter"}[cut.direction]
                 if args.collective != "alltoall" else cut.direction)
        what = f"tightest cut ({phase})" if len(b.cuts) > 1 else "tightest cut"
        a = len(cut.ranks)
        carries = (f"{a} ranks' data" if args.collective != "alltoall" else
                   f"{a} x {b.ranks - a} ranks' pieces")
        rows.append((what, f"ranks {_ranks(cut.ranks)}: {cut.bandwidth_GBps:g} GB/s "
                           f"{cut.direction} for {carries}"))
        if cut.switches:
            rows.append(("  through fabric switches", _names(cut.switches)))
    if anyform is not None:
        rows.append(("any form (phases overlapped)",
                     f"largest algbw {anyform.algbw_GBps:.2f} GB/s ({anyform.method})"))
    _table(rows, header=False)
    return 0


def _network(topo) -> str:
    """``efa, 20 us per network hop`` (the latency only where a cluster has a network)."""
    fabric = [d.get("latency") for _, d in topo.graph.nodes(data=True) if d.get("kind") == "fabric"]
    if fabric and fabric[0] is not None:
        return f"{topo.network_kind}, {fabric[0]:g} us per network hop"
    return topo.network_kind


def _ranks(ranks) -> str:
    """``0-3 6`` for (0, 1, 2, 3, 6)."""
    out, run = [], [ranks[0]]
    for r in ranks[1:]:
        if r == run[-1] + 1:
            run.append(r)
            continue
        out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
        run = [r]
    out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
    return " ".join(out)


def _names(names) -> str:
    """The first few names and how many more."""
    shown = ", ".join(names[:4])
    return shown + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def _span(pair: tuple[float, float]) -> str:
    lo, hi = pair
    return f"{lo:g}" if lo == hi else f"{lo:g}-{hi:g}"


def _matrix(topo) -> None:
    bw = topo.bandwidth_matrix()
    n = topo.num_nodes()
    if n > 32:
        print(f"(matrix of {n} ranks not printed; at most 32)")
        return
    rows = [("src\\dst",) + tuple(str(d) for d in range(n))]
    rows += [(str(s),) + tuple(f"{bw[s, d]:g}" if bw[s, d] else "." for d in range(n))
             for s in range(n)]
    _table(rows)


def _table(rows, header: bool = True) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for k, row in enumerate(rows):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
        if header and k == 0:
            print("  ".join("-" * w for w in widths))
