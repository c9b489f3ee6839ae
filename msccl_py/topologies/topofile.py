"""Read topology files (``*.topo``) into machine and cluster specifications.

The grammar is ``topofile.lark``. A file holds ``machine`` blocks (GPUs, link
types, point-to-point links with multiplicity or bandwidth, switch groups,
NICs and which GPUs share them, drawing positions) and ``cluster`` blocks
(N copies of a machine, inter-node bandwidth, NIC placement). Example::

    machine pair {
      gpus 2
      linktype nvlink 25 GB/s          # per link, per direction
      link 0 <-> 1 nvlink x4           # 4 links each way
      nic ib0 100 Gb/s gpus 0-1        # one NIC shared by both GPUs
      threadblock 40 GB/s              # performance model: per-threadblock limit
      threadblock LL 20 GB/s           # ... and one protocol's own, on top of it
      protocol Simple latency 3 us base 8 us   # extra α per hop, fixed cost per call
    }
    cluster pairs { machine pair  nodes 4 }

Syntax errors and semantic errors (unknown link type, rank out of range,
duplicate link) name file, line and column. :mod:`.compose` turns specs into
:class:`~msccl_py.topologies.topology.Topology` objects.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field

from msccl_py.errors import TopologyError
from msccl_py.topologies import larkutil

#: protocols a ``protocol`` statement may tune (the runtimes' three)
PROTOCOL_NAMES = ("Simple", "LL", "LL128")
#: host CPU vendors a machine may state (``cpu NAME``); NCCL's tuning reads the vendor
#: (``ncclTopoCpuType``) for its LL limit and network overhead across nodes
CPU_VENDORS = ("amd", "intel", "arm")
_BW = {"GB/s": 1.0, "Gb/s": 1 / 8, "MB/s": 1e-3, "Mb/s": 1e-3 / 8}
_TIME = {"us": 1.0, "ns": 1e-3, "ms": 1e3}


@dataclass
class Where:
    """A statement's position, for error messages."""
    file: str
    line: int
    column: int

    def error(self, message: str) -> TopologyError:
        return TopologyError(message, self.file, self.line, self.column)


@dataclass
class LinkType:
    name: str
    bw: float | None          # GB/s per link per direction; None: unitless weights
    latency: float | None     # µs


@dataclass
class Edge:
    src: int
    dst: int
    count: float
    bw: float | None
    kind: str
    latency: float | None
    via: str | None = None


@dataclass
class SwitchSpec:
    name: str
    gpus: list[int]
    count: float
    port_bw: float | None
    kind: str
    total_bw: float | None


@dataclass
class NicSpec:
    name: str
    bw: float
    gpus: list[int]


@dataclass
class MachineSpec:
    name: str
    where: Where
    title: str | None = None
    model: str | None = None
    cpu: str | None = None                    # host CPU vendor (CPU_VENDORS)
    gpus: int | None = None
    linktypes: dict[str, LinkType] = field(default_factory=dict)
    unit: str | None = None
    edges: dict[tuple[int, int], Edge] = field(default_factory=dict)
    switches: list[SwitchSpec] = field(default_factory=list)
    nics: list[NicSpec] = field(default_factory=list)
    places: dict[int, tuple[float, float]] = field(default_factory=dict)
    extends: str | None = None
    threadblock_bw: float | None = None       # GB/s one threadblock moves per direction
    protocol_threadblock: dict[str, float] = field(default_factory=dict)  # per protocol, on top
    memory_bw: float | None = None            # GB/s of a local copy/reduce
    protocols: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    network_kind: str | None = None           # ib, roce, efa, tcpxo (topologies/networks.py)
    network_latency: float | None = None      # µs per network hop, overriding the kind's
    launch_us: float | None = None            # host time per kernel launch (µs)
    bandwidth_scale: float | None = None      # every bandwidth runs at this share of its figure
    #: per protocol (LL, LL128, Simple) of NCCL's own algorithms, or MSCCL (RCCL's built-in
    #: MSCCL kernels): the share of the bandwidth it reaches, on top of ``bandwidth_scale``
    bandwidth_shares: dict[str, float] = field(default_factory=dict)
    #: RCCL's built-in MSCCL kernels: ``launch`` (µs per launch) and per protocol their
    #: fixed cost per call (µs), where calibration fitted them apart from RCCL's own kernels
    msccl: dict[str, float] = field(default_factory=dict)
    #: a process driving several GPUs issues the next call's launches while the GPUs run
    #: this one (``launch T overlapped``): a call takes the longer of the two, not their sum
    launch_overlapped: bool = False
    #: µs each NVLS / NVLSTree pipeline piece pays on top of its bytes (``nvls step T``)
    nvls_step_us: float | None = None

    def unit_bw(self) -> float | None:
        """GB/s of one ``links`` unit: the ``unit`` link type, else the first with a bandwidth."""
        if self.unit is not None:
            return self.linktypes[self.unit].bw
        for lt in self.linktypes.values():
            if lt.bw is not None:
                return lt.bw
        bws = [e.bw for e in self.edges.values() if e.bw is not None]
        return bws[0] if bws else None


@dataclass
class ClusterSpec:
    name: str
    where: Where
    title: str | None = None
    machine: str | None = None
    nodes: int | None = None
    network_bw: float | None = None
    network_latency: float | None = None
    nics: list[NicSpec] | None = None
    network_kind: str | None = None
    fabric: object | None = None      # a fabric.FabricSpec; None: one non-blocking switch


Spec = MachineSpec | ClusterSpec


def parse_text(text: str, file: str | None = None,
               resolve_base=None) -> dict[str, Spec]:
    """Parse topology-file text into specs by name, in file order.

    ``resolve_base(name, where)`` returns the MachineSpec a ``machine X extends
    Y`` block builds on when Y is not defined earlier in the same text.

    >>> specs = parse_text("machine two { gpus 2 linktype l 10 GB/s link 0 <-> 1 l x3 }")
    >>> specs["two"].edges[(1, 0)].bw
    30.0
    """
    _negative_speed(text, file)
    tree = larkutil.parse("topofile.lark", text, file)
    where_file = file or "<text>"
    _zero_speed(tree, where_file)
    specs: dict[str, Spec] = {}
    for item in tree.children:
        where = Where(where_file, item.meta.line, item.meta.column)
        name = str(item.children[0])
        if name in specs:
            raise where.error(f"'{name}' is defined twice in this file")
        if item.data == "machine":
            base_name = item.children[1]
            base = None
            if base_name is not None:
                base = specs.get(str(base_name))
                if base is None and resolve_base is not None:
                    base = resolve_base(str(base_name), where)
                if not isinstance(base, MachineSpec):
                    raise where.error(f"machine '{name}' extends unknown machine '{base_name}'")
            specs[name] = _machine(name, where, base, item.children[2:])
        else:
            specs[name] = _cluster(name, where, item.children[1:])
    return specs


# ------------------------------------------------------------------ input validation
def decode(data: bytes, file: str | None = None) -> str:
    """A topology file's bytes as text: UTF-8, else a TopologyError at the first byte that
    is not (line and column, and the byte)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[:exc.start]
        line = before.count(b"\n") + 1
        column = exc.start - (before.rfind(b"\n") + 1) + 1
        raise TopologyError(f"not UTF-8 text: byte 0x{data[exc.start]:02x} cannot be decoded "
                            f"(save the file as UTF-8)", file or "<text>", line,
                            column) from None


_NEGATIVE = re.compile(r"(?<![\w.])-\s*\d+(?:\.\d+)?\s*(GB/s|Gb/s|MB/s|Mb/s)")


def _negative_speed(text: str, file: str | None) -> None:
    """A negative bandwidth, said as such (the grammar would only call the '-' unexpected)."""
    for m in _NEGATIVE.finditer(text):
        start = text.rfind("\n", 0, m.start()) + 1
        if "#" in text[start:m.start()]:
            continue          # in a comment
        raise TopologyError(f"bandwidth {m.group(0)} is negative: a speed must be above 0",
                            file or "<text>", text.count("\n", 0, m.start()) + 1,
                            m.start() - start + 1)


def _zero_speed(tree, file: str) -> None:
    """Every bandwidth the file gives is above 0 (a 0 GB/s link, NIC or threadblock would
    make every time through it infinite; leave out a link that does not exist)."""
    for stmt in tree.iter_subtrees():
        if stmt.data in ("threadblock", "memory", "nic"):
            continue      # their statements refuse 0 in their own words
        for sub in stmt.children:
            if getattr(sub, "data", None) != "bandwidth":
                continue
            number, unit = sub.children
            if float(number) > 0:
                continue
            raise TopologyError(f"bandwidth {number} {unit} is not above 0: a speed must "
                                f"be positive (leave out a link that does not exist)", file,
                                number.line, number.column)


# ------------------------------------------------------------------ machines
def _machine(name: str, where: Where, base: MachineSpec | None, stmts) -> MachineSpec:
    if base is not None:
        spec = copy.deepcopy(base)
        spec.name, spec.where, spec.extends = name, where, base.name
        inherited_nics = True
    else:
        spec = MachineSpec(name, where)
        inherited_nics = False
    for st in stmts:
        at = Where(where.file, st.meta.line, st.meta.column)
        kind, args = st.data, st.children
        if kind == "title":
            spec.title = _string(args[0])
        elif kind == "model":
            spec.model = _string(args[0])
        elif kind == "cpu":
            vendor = str(args[0]).lower()
            if vendor not in CPU_VENDORS:
                raise at.error(f"unknown CPU vendor '{args[0]}'; expected one of "
                               f"{', '.join(CPU_VENDORS)}")
            spec.cpu = vendor
        elif kind == "gpus":
            count = _int(args[0], at, "GPU count")
            if count < 1:
                raise at.error("a machine needs at least one GPU")
            if spec.gpus is not None and spec.gpus != count:
                raise at.error(f"machine '{name}' has {spec.gpus} GPUs already "
                               f"(from '{spec.extends or name}')")
            spec.gpus = count
        elif kind == "linktype":
            lt = str(args[0])
            if lt in spec.linktypes and base is None:
                raise at.error(f"link type '{lt}' is declared twice")
            spec.linktypes[lt] = LinkType(lt, _bandwidth(args[1]), _latency(args[2]))
        elif kind == "unit":
            unit = str(args[0])
            if unit not in spec.linktypes or spec.linktypes[unit].bw is None:
                raise at.error(f"unit '{unit}' must name a declared link type with a bandwidth")
            spec.unit = unit
        elif kind == "link":
            _need_gpus(spec, at)
            src = _rank(args[0], spec, at)
            dst = _rank(args[2], spec, at)
            if src == dst:
                raise at.error(f"link from GPU {src} to itself")
            count, bw, lt = _linkspec(args[3], spec, at)
            latency = _latency(args[4]) if args[4] is not None else (lt.latency if lt else None)
            pairs = [(src, dst), (dst, src)] if str(args[1]) == "<->" else [(src, dst)]
            for s, d in pairs:
                _add_edge(spec, at, Edge(s, d, count, bw, lt.name if lt else "link", latency))
        elif kind == "matrix":
            _matrix(spec, at, args)
        elif kind == "switch":
            _switch(spec, at, args)
        elif kind == "nic":
            _need_gpus(spec, at)
            if inherited_nics:
                spec.nics, inherited_nics = [], False
            nic = _nic(args, spec.gpus, at)
            if any(n.name == nic.name for n in spec.nics):
                raise at.error(f"NIC '{nic.name}' is declared twice")
            spec.nics.append(nic)
        elif kind == "place":
            _need_gpus(spec, at)
            spec.places[_rank(args[0], spec, at)] = (float(args[1]), float(args[2]))
        elif kind == "threadblock":
            bw = _bandwidth(args[1])
            if not bw:
                raise at.error("'threadblock' needs a positive bandwidth")
            if args[0] is None:
                spec.threadblock_bw = bw
            else:
                spec.protocol_threadblock[_protocol(args[0], at)] = bw
        elif kind == "memory":
            bw = _bandwidth(args[0])
            if not bw:
                raise at.error("'memory' needs a positive bandwidth")
            spec.memory_bw = bw
        elif kind == "protocol":
            spec.protocols[_protocol(args[0], at)] = (_latency(args[1]), _latency(args[2]))
        elif kind == "netkind":
            _network_kind(spec, args[0], args[1], at)
        elif kind in ("launch", "bwscale", "msccl", "nvls"):
            _calibrated(spec, kind, args, at)
    if spec.gpus is None:
        raise where.error(f"machine '{name}' does not say how many GPUs it has (add 'gpus N')")
    unit = spec.unit_bw()
    for lt in spec.linktypes.values():
        used = any(e.kind == lt.name for e in spec.edges.values())
        if lt.bw is None and unit is not None and used:
            raise where.error(f"machine '{name}': link type '{lt.name}' has no bandwidth "
                              f"but other links do; give it one")
    return spec


def _protocol(tok, at: Where) -> str:
    proto = str(tok)
    if proto not in PROTOCOL_NAMES:
        raise at.error(f"unknown protocol '{proto}'; expected one of {', '.join(PROTOCOL_NAMES)}")
    return proto


def _need_gpus(spec: MachineSpec, at: Where) -> None:
    if spec.gpus is None:
        raise at.error("'gpus N' must come before links, switches, NICs and positions")


def _add_edge(spec: MachineSpec, at: Where, edge: Edge) -> None:
    """Add ``edge``; where a switch also joins the pair, the pair talks over the faster path
    (the direct link on a tie), as NCCL takes a GPU pair's best path."""
    key = (edge.src, edge.dst)
    old = spec.edges.get(key)
    if old is not None:
        if not (old.via or edge.via) or (old.via and edge.via and old.via == edge.via):
            raise at.error(f"duplicate link {edge.src}->{edge.dst}")
        if _faster(old, edge):
            return
    spec.edges[key] = edge


def _faster(old: Edge, new: Edge) -> bool:
    """Whether ``old`` stays: the faster path, the direct link on a tie (unitless: link counts)."""
    a, b = (e.bw if e.bw is not None else e.count for e in (old, new))
    return a > b or (a == b and not old.via)


def _linkspec(tree, spec: MachineSpec, at: Where) -> tuple[float, float | None, LinkType | None]:
    """(count, bandwidth GB/s or None when unitless, link type)."""
    if tree.data == "raw_link":
        return 1, _bandwidth(tree.children[0]), None
    name = str(tree.children[0])
    lt = spec.linktypes.get(name)
    if lt is None:
        raise at.error(f"unknown link type '{name}' (declare it with 'linktype {name} BW')")
    mult = tree.children[1]
    count = int(str(mult)[1:]) if mult is not None else 1
    if count < 1:
        raise at.error("link multiplicity must be at least x1")
    return count, (count * lt.bw if lt.bw is not None else None), lt


def _matrix(spec: MachineSpec, at: Where, args) -> None:
    _need_gpus(spec, at)
    name, order, values = str(args[0]), str(args[1]), args[2:]
    lt = spec.linktypes.get(name)
    if lt is None:
        raise at.error(f"unknown link type '{name}' (declare it with 'linktype {name} BW')")
    n = spec.gpus
    if len(values) != n * n:
        raise at.error(f"matrix needs {n}x{n} = {n * n} numbers for {n} GPUs, got {len(values)}")
    for k, tok in enumerate(values):
        value = float(tok)
        row, col = divmod(k, n)
        if row == col:
            if value:
                raise Where(at.file, tok.line, tok.column).error(
                    f"matrix diagonal entry for GPU {row} must be 0")
            continue
        if value:
            src, dst = (col, row) if order == "dst-src" else (row, col)
            bw = value * lt.bw if lt.bw is not None else None
            _add_edge(spec, Where(at.file, tok.line, tok.column),
                      Edge(src, dst, value, bw, lt.name, lt.latency))


def _switch(spec: MachineSpec, at: Where, args) -> None:
    _need_gpus(spec, at)
    name = str(args[0])
    gpus = _ranks(args[1], spec, at)
    count, bw, lt = _linkspec(args[2], spec, at)
    total = _bandwidth(args[3]) if args[3] is not None else None
    if any(s.name == name for s in spec.switches):
        raise at.error(f"switch '{name}' is declared twice")
    spec.switches.append(SwitchSpec(name, gpus, count, bw, lt.name if lt else "link", total))
    latency = lt.latency if lt else None
    for s in gpus:
        for d in gpus:
            if s != d:
                _add_edge(spec, at, Edge(s, d, count, bw, lt.name if lt else "link", latency, name))


def _nic(args, gpus: int, at: Where) -> NicSpec:
    bw = _bandwidth(args[1])
    if not bw:
        raise at.error("a NIC needs a positive bandwidth")
    ranks = _ranks(args[2], None, at, gpus)
    return NicSpec(str(args[0]), bw, ranks)


# ------------------------------------------------------------------ clusters
def _cluster(name: str, where: Where, stmts) -> ClusterSpec:
    spec = ClusterSpec(name, where)
    for st in stmts:
        at = Where(where.file, st.meta.line, st.meta.column)
        kind, args = st.data, st.children
        if kind == "title":
            spec.title = _string(args[0])
        elif kind == "uses":
            spec.machine = str(args[0])
        elif kind == "nodes":
            spec.nodes = _int(args[0], at, "node count")
            if spec.nodes < 1:
                raise at.error("a cluster needs at least one node")
        elif kind == "network":
            spec.network_bw = _bandwidth(args[0])
            spec.network_latency = _latency(args[1])
            if args[2] is not None:
                _network_kind(spec, args[2], None, at)
        elif kind == "netkind":
            _network_kind(spec, args[0], args[1], at)
        elif kind == "nic":
            spec.nics = (spec.nics or []) + [_nic(args, None, at)]
        elif kind == "fabric":
            from msccl_py.topologies.fabric import parse_fabric
            spec.fabric = parse_fabric(st, at)
    if spec.machine is None:
        raise where.error(f"cluster '{name}' does not say which machine it copies "
                          f"(add 'machine NAME')")
    return spec


def _network_kind(spec: MachineSpec | ClusterSpec, name, latency, at: Where) -> None:
    """``network kind K [latency T]``: the NICs' network kind, and a latency overriding its default."""
    from msccl_py.topologies import networks
    try:
        spec.network_kind = networks.kind(str(name)).name
    except TopologyError as exc:
        raise Where(at.file, name.line, name.column).error(exc.message) from None
    if latency is not None:
        spec.network_latency = _latency(latency)


#: what ``bandwidth scale KEY X`` may name: NCCL's protocols, and RCCL's MSCCL kernels
SHARE_KEYS = ("LL", "LL128", "Simple", "MSCCL")


def _calibrated(spec: MachineSpec, kind: str, args, at: Where) -> None:
    """``launch [MSCCL] T``, ``msccl P base T``, ``nvls step T``, ``bandwidth scale X`` and
    ``bandwidth scale KEY X`` (KEY a protocol or MSCCL), which ``msccl-py calibrate`` writes."""
    if kind == "nvls":
        spec.nvls_step_us = float(args[0]) * _TIME[str(args[1])]
        return
    if kind == "msccl":
        base = _latency(args[1])
        if base is None or base < 0:
            raise at.error(f"'msccl {args[0]} base' needs a fixed cost of at least 0")
        spec.msccl[_protocol(args[0], at)] = base
        return
    if kind == "launch":
        us = float(args[1]) * _TIME[str(args[2])]
        if args[0] is None:
            spec.launch_us = us
            spec.launch_overlapped = args[3] is not None
        elif str(args[0]) == "MSCCL" and args[3] is None:
            spec.msccl["launch"] = us
        else:
            raise at.error(f"'launch {args[0]}': a launch time is the machine's (which may "
                           f"overlap calls: 'launch T overlapped'), or RCCL's MSCCL kernels' "
                           f"('launch MSCCL T'), not {str(args[0])!r}'s" if args[3] is None
                           else "'launch MSCCL ... overlapped': whether launches overlap calls "
                           "is the process's, said on the machine's 'launch T overlapped'")
        return
    key, value = (None if args[0] is None else str(args[0])), args[1]
    if key is not None and key not in SHARE_KEYS:
        raise at.error(f"'bandwidth scale {key}': the share is per protocol or for RCCL's "
                       f"MSCCL kernels ({', '.join(SHARE_KEYS)}), not {key!r}")
    scale = float(value)
    what = "bandwidth scale" + (f" {key}" if key else "")
    if not 0 < scale <= 1:
        raise at.error(f"'{what}' must be above 0 and at most 1 (a machine runs no "
                       f"faster than its links), got {value}")
    if key is None:
        spec.bandwidth_scale = scale
    else:
        spec.bandwidth_shares[key] = scale


# ------------------------------------------------------------------ values
def _string(tok) -> str:
    return str(tok)[1:-1]


def _int(tok, at: Where, what: str) -> int:
    text = str(tok)
    if "." in text:
        raise Where(at.file, tok.line, tok.column).error(f"{what} must be an integer, got {text}")
    return int(text)


def _rank(tok, spec: MachineSpec, at: Where) -> int:
    rank = _int(tok, at, "GPU index")
    if not 0 <= rank < spec.gpus:
        raise Where(at.file, tok.line, tok.column).error(
            f"GPU {rank} out of range: machine '{spec.name}' has GPUs 0..{spec.gpus - 1}")
    return rank


def _ranks(tree, spec: MachineSpec | None, at: Where, gpus: int | None = None) -> list[int]:
    limit = spec.gpus if spec is not None else gpus
    out: list[int] = []
    for tok in tree.children:
        here = Where(at.file, tok.line, tok.column)
        if tok.type == "RANGE":
            lo, hi = (int(x) for x in str(tok).split("-"))
            if lo > hi:
                raise here.error(f"empty GPU range {tok}")
            values = range(lo, hi + 1)
        else:
            values = [_int(tok, here, "GPU index")]
        for r in values:
            if limit is not None and not 0 <= r < limit:
                raise here.error(f"GPU {r} out of range 0..{limit - 1}")
            if r in out:
                raise here.error(f"GPU {r} listed twice")
            out.append(r)
    return out


def _bandwidth(tree) -> float | None:
    if tree is None:
        return None
    number, unit = tree.children
    return float(number) * _BW[str(unit)]


def _latency(tree) -> float | None:
    if tree is None:
        return None
    number, unit = tree.children
    return float(number) * _TIME[str(unit)]
