"""``msccl-py simulate TARGET --topology T``: predicted time, algbw, busbw and bottleneck per size.

TARGET is ``nccl`` (what NCCL itself runs at each size: its algorithm,
protocol and channels by its own cost model, ``--collective`` saying which
collective), an XML file, an MSCCL++ plan (``.json``), an MSCCLang program file
(its first ``XML()``) or a library program name (``--ranks``, default the
machine's GPU count; ``--param``, ``--instances``, ``--protocol`` as in
``compile``). ``--compare`` adds more targets, each ``NAME[:K=V,K=V...]``
(program parameters, and ``instances`` / ``protocol``), shown side by side.
NCCL's baselines (``nccl_ring``, ``nccl_tree``, ...) are built for the machine
simulated unless given a ``topology``, and run each size as NCCL would (its
protocol and channel count) unless given a protocol or ``rings``/``trees``.
``--topology FILE --gpu-model NAME`` reads saved ``nvidia-smi topo -m``
output. ``--plot OUT.png`` draws busbw against size (matplotlib, the ``plot``
extra). ``--json`` prints only JSON. ``--gpus-per-process N`` times every target as
launched by one process per N GPUs (nccl-tests ``-g N``).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field

from msccl_py.cli import add_command
from msccl_py.errors import MscclError, ProgramError, TopologyError

DEFAULT_SIZES = "1KiB:1GiB"


def register(subparsers) -> None:
    p = add_command(subparsers, "simulate")
    p.add_argument("target", metavar="TARGET",
                   help="nccl (what NCCL itself runs), an MSCCL XML file, an MSCCL++ plan "
                        "(.json), a program file, or a library program name (NAME[:K=V,...] "
                        "takes parameters)")
    p.add_argument("--topology", required=True, metavar="T",
                   help="machine: a topology name (see `msccl-py topology list`), a .topo "
                        "file, or saved `nvidia-smi topo -m` output with --gpu-model")
    p.add_argument("--gpu-model", metavar="NAME", default=None,
                   help="GPU model of an nvidia-smi --topology (e.g. H100, A100, V100): its "
                        "datasheet NVLink and PCIe speeds")
    p.add_argument("--nodes", type=int, default=None, metavar="K",
                   help="K copies of the machine joined by its NICs")
    p.add_argument("--layout", default=None, metavar="HxR",
                   help="a launch's layout, as msccl_py.init() reports it (MSCCL_PY_DEBUG=INFO): "
                        "H copies of the machine, each running R ranks on its first R GPUs; "
                        "hierarchical library programs get gpus_per_node=R")
    p.add_argument("--placement", default=None, metavar="P",
                   help="where the job's machines sit in a leaf/spine cluster's leaf groups, "
                        "in rank order: packed, round-robin, scattered or scattered:SEED "
                        "(default: the cluster file's)")
    p.add_argument("--sizes", default=DEFAULT_SIZES, metavar="SPEC",
                   help=f"sizes as nccl-tests counts them: a comma list (1MiB,64MiB) or a range "
                        f"LO:HI doubling (default {DEFAULT_SIZES})")
    p.add_argument("--exact", action="store_true",
                   help="time every rank with the full event model (default: ranks that a "
                        "verified symmetry makes alike are timed once; the two agree)")
    p.add_argument("--json", action="store_true",
                   help="print only a JSON list of {bytes, time_us, algbw_GBps, busbw_GBps, "
                        "bottleneck} (with --compare: one {target, results} per target)")
    p.add_argument("--trace", metavar="OUT.json",
                   help="write a Chrome trace-event file of TARGET at the largest size")
    p.add_argument("--compare", nargs="+", action="extend", default=[], metavar="A",
                   help="more targets to show side by side, each NAME[:K=V,...] (program "
                        "parameters, instances=, protocol=) or a file")
    p.add_argument("--plot", metavar="OUT.png",
                   help="draw busbw against size of every target (needs matplotlib)")
    p.add_argument("--collective", default=None, metavar="C",
                   help="the nccl target's collective: allreduce (default), allgather, "
                        "reduce_scatter, broadcast, reduce or alltoall")
    p.add_argument("--gpus-per-process", type=int, default=1, metavar="N",
                   help="one process drives N GPUs, as nccl-tests -g N (default 1, as PyTorch "
                        "and MPI jobs run): adds N-1 kernel launches to every call")
    p.add_argument("--ranks", type=int, default=None,
                   help="library programs: rank count (default: the machine's GPUs)")
    p.add_argument("--param", action="append", default=[], metavar="K=V",
                   help="library program parameter of TARGET (repeatable)")
    p.add_argument("--instances", type=int, default=None,
                   help="library programs: instances (default 1)")
    p.add_argument("--protocol", default=None,
                   help="library programs: Simple, LL or LL128 (default: the program's; "
                        "nccl and NCCL's baselines: NCCL's choice per size, this forces it as "
                        "NCCL_PROTO does)")
    p.set_defaults(func=run)


@dataclass
class Run:
    """One target simulated: what it is, and its result per size."""

    label: str
    summary: str                      # "allreduce, Simple, 8 ranks, 2 channels, 1 instance"
    results: list
    alg: object = None                # the ir.Algorithm traced (None for plans)
    picks: list = field(default_factory=list)   # per size (protocol, channels), baselines


def split_target(text: str) -> tuple[str, list[str]]:
    """``NAME:K=V,K=V`` -> (NAME, ["K=V", ...]); a file name is kept whole.

    >>> split_target("allreduce_ring:channels=8,protocol=LL")
    ('allreduce_ring', ['channels=8', 'protocol=LL'])
    >>> split_target("ring.xml")
    ('ring.xml', [])
    """
    if os.path.exists(text):
        return text, []
    name, sep, rest = text.partition(":")
    if not sep or "=" not in rest:
        return text, []
    return name, [item for item in rest.split(",") if item.strip()]


def _is_file_target(name: str) -> bool:
    return name.endswith((".xml", ".json", ".py")) or os.path.isfile(name)


def load_target(target: str, ranks: int, params: list[str], instances: int | None,
                protocol: str | None):
    """(label, ir.Algorithm) of an XML file, a program file or a library program name."""
    if target.endswith(".xml") or (os.path.isfile(target) and not target.endswith(".py")):
        from msccl_py.targets.msccl import read_xml
        if not os.path.isfile(target):
            raise MscclError(f"no such XML file: {target}")
        return os.path.basename(target), read_xml(target)
    if target.endswith(".py") or os.path.isfile(target):
        from msccl_py.cli import say_notes
        from msccl_py.toolchain import run_program_file
        arts = run_program_file(target, [], on_artifact=say_notes).artifacts
        if not arts:
            raise ProgramError("the program produced no XML (it never called XML())", target)
        return os.path.basename(target), arts[0].algorithm
    from msccl_py import library
    values = library.parse_param_values(target, params)
    kwargs = dict(values, instances=instances or 1)
    if protocol:
        kwargs["protocol"] = protocol
    label = target + "".join(f" {k}={v}" for k, v in values.items())
    return label, library.compile(target, ranks, **kwargs)


def _options(name: str, items: list[str], instances: int | None,
             protocol: str | None) -> tuple[list[str], int | None, str | None]:
    """Split ``instances=`` and ``protocol=`` out of a target's parameters."""
    params = []
    for item in items:
        key, _, value = item.partition("=")
        key = key.strip()
        if key == "instances":
            try:
                instances = int(value)
            except ValueError:
                raise ProgramError(f"{name}: instances must be an integer, got {value!r}") \
                    from None
        elif key == "protocol":
            protocol = value.strip()
        else:
            params.append(item)
    if instances is not None and instances < 1:   # not read as the default 1
        raise ProgramError(f"{name}: instances must be at least 1, got {instances}")
    return params, instances, protocol


def _summary(alg, instances: int | None) -> str:
    inst = "" if instances is None else f", {instances} instance{'s' * (instances != 1)}"
    return (f"{alg.collective}, {alg.protocol}, {alg.ngpus} ranks, {alg.nchannels} "
            f"channel{'s' * (alg.nchannels != 1)}{inst}")


def _target_run(text: str, args, machine, sizes, extra: list[str]) -> Run:
    name, items = split_target(text)
    items = items + extra
    if name == "nccl" and not os.path.exists(name):
        return _nccl_run(items, args, machine, sizes)
    if _is_file_target(name):
        if items:
            raise ProgramError(f"{name} is a file; parameters ({', '.join(items)}) apply to "
                               f"library programs only")
        if name.endswith(".json") or _looks_like_plan(name):
            return _plan_run(name, machine, sizes)
        label, alg = load_target(name, 0, [], None, None)
        if args.ranks is not None and args.ranks != alg.ngpus:
            raise ProgramError(f"{name} has {alg.ngpus} ranks, not --ranks {args.ranks}: a "
                               f"file's rank count is its own (drop --ranks)")
        warn_size_range(label, alg, sizes)
        return Run(label, _summary(alg, None), _timed(alg, machine, sizes, args, label), alg)
    params, instances, protocol = _options(name, items, args.instances, args.protocol)
    params = _layout_param(name, params, args)
    ranks = machine.ngpus if args.ranks is None else args.ranks   # 0 is refused, not 8
    from msccl_py.tuning.nccl import BASELINES
    if name in BASELINES:
        return _baseline_run(name, params, instances, protocol, ranks, args, machine, sizes)
    label, alg = load_target(name, ranks, params, instances, protocol)
    return Run(label, _summary(alg, instances or 1), _timed(alg, machine, sizes, args, label),
               alg)


#: a program of this many ranks or more that no symmetry shortens gets a note on stderr
SLOW_RANKS = 256


def _timed(alg, machine, sizes, args, label: str) -> list:
    """``simulate`` of one target, every rank timed under --exact; a note on stderr when a
    large program has no symmetry to shorten its simulation."""
    from msccl_py.plan.tables import plan_for
    from msccl_py.simulate import quotient, simulate
    if not args.exact and alg.ngpus >= SLOW_RANKS and \
            quotient(plan_for(alg), machine, alg.protocol) is None:
        print(f"note: {label}: no symmetry found among its {alg.ngpus} ranks on "
              f"{machine.name}, so every rank is timed (docs/performance-model.md, the "
              f"fast path)", file=sys.stderr)
    return simulate(alg, machine, sizes, exact=args.exact)


def _nccl_run(items: list[str], args, machine, sizes) -> Run:
    """What NCCL (RCCL) itself runs at each size on the machine simulated."""
    from msccl_py.tuning.nccl import simulate_nccl
    params, instances, protocol = _options("nccl", items, None, args.protocol)
    if params or instances is not None:
        raise ProgramError(f"nccl takes only protocol=; got {', '.join(params) or 'instances'}")
    if args.ranks is not None and args.ranks != machine.ngpus:
        raise ProgramError(f"nccl runs on every GPU of the machine simulated ({machine.ngpus}), "
                           f"not --ranks {args.ranks}: drop --ranks, or pick the machine and "
                           f"--nodes that have {args.ranks} GPUs")
    collective = args.collective or "allreduce"
    results = simulate_nccl(machine.topology, collective, sizes, protocol=protocol,
                            gpus_per_process=args.gpus_per_process, machine=machine)
    lib = "RCCL" if results and results[0].algorithm == "MSCCL" or _amd(machine) else "NCCL"
    summary = (f"{collective}, {machine.ngpus} ranks, {lib}'s own choice per size"
               + (f", protocol {protocol} forced" if protocol else "") + _fabric_note(
                   machine.topology, dict.fromkeys(r.algorithm for r in results)))
    return Run("nccl", summary, results, None,
               [(f"{r.algorithm}/{r.protocol}", r.channels) for r in results])


def _amd(machine) -> bool:
    from msccl_py.tuning.rccl import amd_arch
    return amd_arch(machine.topology) is not None


def _with_launch(run_: Run, machine, gpus_per_process: int) -> Run:
    """A target's results launched ``gpus_per_process`` GPUs per process."""
    if gpus_per_process <= 1 or run_.label == "nccl":
        return run_
    from dataclasses import replace
    out = []
    for r in run_.results:
        t = machine.launched_us(r.time_us, gpus_per_process)
        out.append(replace(r, time_us=t, algbw_GBps=r.bytes / (t * 1e3),
                           busbw_GBps=r.busbw_GBps * r.time_us / t))
    return replace(run_, results=out)


def warn_size_range(label: str, alg, sizes) -> None:
    """Say on stderr which sizes lie outside the XML's minBytes/maxBytes (the runtime would
    not run it there; the prediction is printed all the same)."""
    from msccl_py.plan.sizes import format_size
    lo, hi = alg.min_bytes or 0, alg.max_bytes or 0
    out = [s for s in sizes if s < lo or (hi and s > hi)]
    if not out:
        return
    span = f"{lo} to {hi} B" if hi else f"{lo} B and up"
    print(f"warning: {label} declares sizes {span} (minBytes/maxBytes): the runtime would not "
          f"run it at {', '.join(format_size(s) for s in out)}; predicted anyway",
          file=sys.stderr)


def layout_of(args) -> tuple[int | None, int | None]:
    """(nodes, GPUs used per node) from --nodes or --layout (which excludes --nodes)."""
    if getattr(args, "layout", None) is None:
        return args.nodes, None
    from msccl_py.transport.layout import parse_shape
    if args.nodes is not None:
        raise MscclError("--layout HxR gives the node count; drop --nodes")
    return parse_shape(args.layout)


def _layout_param(name: str, params: list[str], args) -> list[str]:
    """A hierarchical library program splits as the launch does: gpus_per_node=R."""
    _, per = layout_of(args)
    if per is None or any(p.partition("=")[0].strip() == "gpus_per_node" for p in params):
        return params
    from msccl_py import library
    try:
        spec = library.get(name)
    except MscclError:
        return params
    return params + [f"gpus_per_node={per}"] if spec.hierarchical else params


def _looks_like_plan(path: str) -> bool:
    from msccl_py.targets.mscclpp.read import is_plan_text
    try:
        with open(path, errors="replace") as f:
            return is_plan_text(f.read(4096))
    except OSError:
        return False


def _plan_run(path: str, machine, sizes) -> Run:
    from msccl_py.targets.mscclpp.read import read_plan
    from msccl_py.simulate.oneside import simulate_plan
    plan = read_plan(path)
    tbs = max((len(g.threadblocks) for g in plan.gpus), default=0)
    summary = (f"MSCCL++ plan, {plan.collective}, {plan.protocol}, {plan.nranks} ranks, "
               f"{tbs} threadblocks per rank")
    return Run(os.path.basename(path), summary, simulate_plan(plan, machine, sizes))


def _baseline_run(name, params, instances, protocol, ranks, args, machine, sizes) -> Run:
    from msccl_py import library
    from msccl_py.tuning.nccl import BASELINES, simulate_baseline
    values = library.parse_param_values(name, params)
    if "topology" not in values:
        values["topology"] = _machine_ref(args, name)
    if args.nodes and "nodes" not in values:
        values["nodes"] = args.nodes
    count = values.get(BASELINES[name][1])
    label = name + "".join(f" {k}={v}" for k, v in values.items())
    if protocol and count:
        alg = library.compile(name, ranks, instances=instances or 1, protocol=protocol,
                              **values)
        return Run(label, _summary(alg, instances or 1),
                   _timed(alg, machine, sizes, args, label), alg)
    results, picks = simulate_baseline(name, machine, sizes, topology=values["topology"],
                                       nodes=values.get("nodes"), protocol=protocol,
                                       channels=count, instances=instances or 1,
                                       exact=args.exact)
    big = max(range(len(sizes)), key=sizes.__getitem__)
    proto, chans = picks[big]
    alg = library.compile(name, ranks, instances=instances or 1, protocol=proto,
                          **{**values, BASELINES[name][1]: chans})
    inst = instances or 1
    summary = (f"{alg.collective}, {ranks} ranks, as NCCL runs each size: "
               f"{_describe_picks(sizes, picks)}, {inst} instance{'s' * (inst != 1)}")
    return Run(label, summary, results, alg, picks)


def _machine_ref(args, program: str) -> str:
    """The --topology to build a baseline for, when it is a machine file or name."""
    if args.gpu_model:
        raise TopologyError(f"{program} builds its rings from a machine file or name, not "
                            f"nvidia-smi output; give it one ({program}:topology=NAME)")
    return args.topology


def _describe_picks(sizes, picks) -> str:
    """``LL 1-12 channels to 2 MiB, Simple 12 channels from 4 MiB``."""
    from msccl_py.plan.sizes import format_size
    order = sorted(range(len(sizes)), key=sizes.__getitem__)
    spans: list[list] = []
    for j in order:
        proto, chans = picks[j]
        if spans and spans[-1][0] == proto:
            spans[-1][1].append(chans)
            spans[-1][3] = sizes[j]
        else:
            spans.append([proto, [chans], sizes[j], sizes[j]])
    parts = []
    for k, (proto, chans, lo, hi) in enumerate(spans):
        lo_c, hi_c = min(chans), max(chans)
        c = f"{lo_c}" if lo_c == hi_c else f"{lo_c}-{hi_c}"
        where = ("" if len(spans) == 1 else
                 f"to {format_size(hi)}" if k == 0 else
                 f"from {format_size(lo)}" if k == len(spans) - 1 else
                 f"at {format_size(lo)}" if lo == hi else
                 f"{format_size(lo)}-{format_size(hi)}")
        parts.append(f"{proto} {c} channel{'s' * (hi_c != 1)}" + (f" {where}" if where else ""))
    return ", ".join(parts)


def _fabric_note(topo, algorithms) -> str:
    """``; leaf uplinks hold Ring to 62% of the NICs (leaf g2 up)`` where the fabric slows
    what NCCL runs (:mod:`msccl_py.tuning.nccl_fabric`)."""
    from msccl_py.tuning.nccl_fabric import fabric_share
    held: dict = {}
    for a in algorithms:
        share, leaf = fabric_share(topo, a)
        if share < 1.0:
            held.setdefault((share, leaf), []).append(a)
    return "".join(f"; leaf uplinks hold {' and '.join(names)} to {share:.0%} of the NICs "
                   f"({leaf})" for (share, leaf), names in held.items())


def load_machine(args):
    """The Machine of --topology (a name, a .topo file, or nvidia-smi output with
    --gpu-model) and --nodes."""
    from msccl_py.simulate import machine_model
    from msccl_py.topologies import load
    nodes, per = layout_of(args)
    if args.gpu_model is None:
        try:
            topo = load(args.topology, nodes=nodes, gpus_per_node=per)
            if getattr(args, "placement", None) is not None:
                from msccl_py.topologies.fabric import place
                place(topo, args.placement)
            return machine_model(topo)
        except TopologyError:
            text = _nvidia_smi_text(args.topology)
            if _rocm_smi(text):
                raise TopologyError(f"{args.topology} is `rocm-smi --showtopo` output, which "
                                    f"msccl-py does not read: name the machine (e.g. "
                                    f"--topology mi300x; `msccl-py topology list`) or write "
                                    f"a .topo file") from None
            if text is not None:
                raise TopologyError(f"{args.topology} is `nvidia-smi topo -m` output, which "
                                    f"names links but not their speed: give the GPU model "
                                    f"with --gpu-model (e.g. H100, A100, V100)") from None
            raise
    from msccl_py.topologies.gpus import read_nvidia_smi_model
    text = _nvidia_smi_text(args.topology)
    if _rocm_smi(text):
        raise TopologyError(f"--gpu-model reads saved `nvidia-smi topo -m` output, and "
                            f"{args.topology} is `rocm-smi --showtopo` output: name the "
                            f"machine instead (e.g. --topology mi300x)")
    if text is None:
        what = ("is not `nvidia-smi topo -m` output (no GPU0 column)"
                if os.path.isfile(args.topology) else "does not exist")
        raise TopologyError(f"--gpu-model reads saved `nvidia-smi topo -m` output, and "
                            f"{args.topology} {what}")
    if nodes not in (None, 1) or getattr(args, "placement", None) is not None:
        raise TopologyError("--nodes, --layout and --placement do not apply to nvidia-smi "
                            "output")
    stem = os.path.splitext(os.path.basename(args.topology))[0]
    return machine_model(read_nvidia_smi_model(text, args.gpu_model, name=stem,
                                               file=args.topology))


def _rocm_smi(text: str | None) -> bool:
    """Whether a saved table (:func:`_nvidia_smi_text`'s) is rocm-smi's, not nvidia-smi's."""
    return text is not None and ("ROCm System Management Interface" in text
                                 or "Link Type between two GPUs" in text)


def _nvidia_smi_text(path: str) -> str | None:
    if not os.path.isfile(path) or path.endswith(".topo"):
        return None
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    return text if "GPU0" in text else None


def run(args) -> int:
    from msccl_py.simulate import parse_sizes
    machine = load_machine(args)
    sizes = parse_sizes(args.sizes)
    if args.gpus_per_process < 1:
        raise MscclError(f"--gpus-per-process must be at least 1, got {args.gpus_per_process}")
    targets = [args.target] + list(args.compare)
    if args.collective is not None and "nccl" not in [split_target(t)[0] for t in targets]:
        raise MscclError("--collective chooses the nccl target's collective; the other "
                         "targets have their own (drop --collective, or simulate nccl)")
    runs = [_target_run(args.target, args, machine, sizes, args.param)]
    runs += [_target_run(t, args, machine, sizes, []) for t in args.compare]
    runs = [_with_launch(r, machine, args.gpus_per_process) for r in runs]
    _no_threadblock_note(machine)
    if args.trace:
        _trace(args.trace, runs[0], machine, sizes)
    if args.plot:
        _plot(args.plot, runs, machine.name)
    if args.json:
        if len(runs) == 1:
            doc = [r.as_dict() for r in runs[0].results]
        else:
            doc = [{"target": r.label, "results": [x.as_dict() for x in r.results]}
                   for r in runs]
        json.dump(doc, sys.stdout, indent=1)
        print()
        return 0
    _print(runs, sizes, f"on {machine.name} ({machine.ngpus} GPUs)")
    if args.trace:
        print(f"wrote {args.trace}", file=sys.stderr)
    if args.plot:
        print(f"wrote {args.plot}", file=sys.stderr)
    return 0


def _no_threadblock_note(machine) -> None:
    """Say (on stderr) when the machine file gives no threadblock figure: then nothing
    bounds one threadblock's rate, and predictions for few threadblocks are optimistic."""
    if machine.threadblock_bw is None and all(
            p.threadblock_bw is None for p in machine.protocols.values()):
        print(f"note: {machine.name} gives no threadblock figure, so this prediction has no "
              f"per-threadblock limit (add 'threadblock BW' to its machine file: "
              f"docs/performance-model.md)", file=sys.stderr)


def _print(runs: list[Run], sizes, title: str) -> None:
    from msccl_py.plan.sizes import format_size
    if len(runs) == 1:
        r = runs[0]
        print(f"{r.label}: {r.summary} {title}")
        nccl = bool(r.picks)
        own = r.label == "nccl"           # its column says it all
        print(f"{'size':>10} {'time us':>12} {'algbw GB/s':>11} {'busbw GB/s':>11}  "
              + (f"{'NCCL runs':<20}" if nccl else "") + ("" if own else "bottleneck"))
        for j, x in enumerate(r.results):
            pick = f"{r.picks[j][0]} x{r.picks[j][1]}" if nccl else ""
            print(f"{format_size(x.bytes):>10} {x.time_us:12.2f} {x.algbw_GBps:11.2f} "
                  f"{x.busbw_GBps:11.2f}  " + (f"{pick:<20}" if nccl else "")
                  + ("" if own else x.bottleneck))
        return
    print(f"busbw GB/s (time us) {title}")
    for k, r in enumerate(runs):
        print(f"  [{k}] {r.label}: {r.summary}")
    print(f"{'size':>10} " + " ".join(f"{f'[{k}]':>20}" for k in range(len(runs))) + "  best")
    for j, nbytes in enumerate(sizes):
        cells = [r.results[j] for r in runs]
        best = min(range(len(cells)), key=lambda k: cells[k].time_us)
        print(f"{format_size(nbytes):>10} " + " ".join(
            f"{c.busbw_GBps:9.2f} ({c.time_us:8.1f})" for c in cells) + f"  [{best}]")


def _trace(path: str, r: Run, machine, sizes) -> None:
    if r.alg is None:
        raise MscclError(f"--trace draws MSCCL algorithms' threadblocks; {r.label} is an "
                         f"MSCCL++ plan")
    from msccl_py.simulate import simulate
    from msccl_py.simulate.trace import write_trace
    largest = max(sizes)
    timings: list = []
    simulate(r.alg, machine, [largest], timings=timings)
    write_trace(path, r.alg, machine, timings[0])


def _plot(path: str, runs: list[Run], machine: str) -> None:
    try:
        from matplotlib.figure import Figure
    except ImportError:
        from msccl_py.topologies.draw import PLOT_EXTRA
        raise MscclError(f"--plot needs matplotlib, which is not installed: "
                         f"{PLOT_EXTRA}") from None
    fig = Figure(figsize=(7, 4.5))
    ax = fig.add_subplot()
    for r in runs:
        ax.plot([x.bytes for x in r.results], [x.busbw_GBps for x in r.results], marker="o",
                markersize=3, label=f"{r.label} ({r.results[0].protocol if r.results else ''})")
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
