"""The machine model: per-path α (latency) and β (bandwidth), shared resources, protocols.

A :class:`Machine` is read from a :class:`~msccl_py.topologies.Topology`:

* every rank → rank link without a switch is one **resource** (its bandwidth
  per direction); a pair joined through a switch uses the sender's switch
  port out and the receiver's switch port in (and the switch's ``total`` when
  given); ranks on different machines use the sender's NIC out and the
  receiver's NIC in. Transfers that share a resource share its bandwidth.
* α of a hop is the link's ``latency`` from the topology file, else the
  default of its kind (:data:`LINK_LATENCY_US`); the network adds the
  cluster's ``network`` latency, else :data:`NETWORK_LATENCY_US`.
* ``threadblock_bw``: the most one threadblock puts on the wire per direction
  (GB/s); ``None`` means no limit. A protocol may carry its own ceiling
  (:attr:`ProtocolModel.threadblock_bw`, the file's ``threadblock P BW``),
  which applies on top. ``memory_bw``: local ``copy``/``reduce`` rate.
* :class:`ProtocolModel` per protocol: data bytes per wire byte (LL 8 of 16,
  LL128 120 of 128, Simple all), extra latency per hop and a fixed cost per
  call. Topology files override them with ``protocol NAME latency T base T``.

Defaults (µs) are NCCL's own tuning figures (``src/graph/tuning.cc``, NCCL
2.12-2.19: ``hwLat`` NVLink ring LL/LL128/Simple 0.6/1.9/3.4, PCI
1.0/2.5/5.7, NET 2.7/4.0/14; ``baseLat`` ring 6.6/14/8.4). A GPU generation
whose kernels measure slower than those (Ampere on NVLink:
:func:`generation_latency`) adds its own fixed cost and NVLink hop latency on
top, for every program alike.

>>> from msccl_py.topologies import loads
>>> m = machine_model(loads("machine r { gpus 2 linktype l 100 GB/s latency 0.5 us "
...                         "link 0 <-> 1 l }"))
>>> p = m.path(0, 1)
>>> p.alpha_us, p.bw_GBps, m.resources[p.resources[0]].name
(0.5, 100.0, 'link 0->1 (l)')
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace

import numpy as np

from msccl_py.errors import SimulationError

#: hardware latency of one hop by link kind (µs), matched as a prefix of the kind name
LINK_LATENCY_US = {"nvlink": 0.6, "xgmi": 0.6, "infinity": 0.6, "pcie": 1.0, "pci": 1.0}
#: latency of a link whose kind is not listed above
DEFAULT_LINK_LATENCY_US = 0.6
#: NIC → network → NIC latency when the cluster does not give one
NETWORK_LATENCY_US = 2.7
#: local copy/reduce rate when the topology file gives no ``memory`` bandwidth (GB/s);
#: HBM3 on H100 SXM is 3.35 TB/s, a copy reads and writes, so about half of it
DEFAULT_MEMORY_BW = 1500.0
#: host time to launch one GPU's kernel of a collective (µs). A process that drives N GPUs
#: (nccl-tests ``-g N``) launches them one after another, so the call ends (N-1) launches
#: later than with one process per GPU. NVIDIA's "Getting Started with CUDA Graphs" (2019)
#: measures 3.8 µs per kernel launched back to back from one thread without graphs.
LAUNCH_US = 3.8
#: NCCL's llMaxBws (src/graph/tuning.cc, NCCL 2.19-2.30): most LL data one GPU moves, all its
#: channels together (GB/s), per generation (Volta, Ampere, Hopper, Blackwell) on one node;
#: across nodes the figure for 2 / more nodes (Intel hosts, first row)
NCCL_LL_MAX_BW = ((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0),
                  (282.0, 90.0, 70.0))
#: nvlsEfficiency (tuning.cc): the share of NVLink an NVLS transfer moves as data, per
#: generation (Volta, Ampere, Hopper, Blackwell; no NVLS before Hopper)
NCCL_NVLS_EFFICIENCY = (0.0, 0.0, 0.85, 0.74)
#: LL128's share of NCCL's NVLink budget (tuning.cc: LL128 ring bus bandwidth 0.92 of Simple's)
NCCL_LL128_SHARE = 0.92
#: RCCL's budget per xGMI link (ROCm/rccl src/graph/topo.h, ncclTopoXGMISpeed): gfx94x
#: (MI300X, MI325X) 48 GB/s, gfx90a (MI250, MI210) 36, older 24
RCCL_XGMI_BW = (("mi3", 48.0), ("mi2", 36.0), ("mi", 24.0))
#: what NCCL's kernels measure on Ampere NVLink (A100, compute capability 8.x) per protocol
#: (LL, LL128, Simple): (fixed µs, µs per ring step). NCCL's constants (the defaults of
#: :data:`PROTOCOLS` with NVLink's 0.6 µs hop) are one set for every generation and match
#: Hopper (DGX H100: ~7.5 µs on 2 GPUs, sjeaugey in NVIDIA/nccl-tests issue #123); the same
#: thread measures a DGX-A100 with NCCL_ALGO=Ring NCCL_MAX_NCHANNELS=1, one thread per GPU,
#: 8-128 B on 2-8 GPUs (LL 12-21 µs, LL128 20-32, Simple 25-84): the least-squares line over
#: the ring's 2(n-1) steps (LL 10.6 + 0.73 per step, LL128 18.0 + 1.0, Simple 14.8 + 4.8).
#: Only where it lies above NCCL's own figure on 8 GPUs (LL 20.8 against 15.0 µs, Simple 82
#: against 56) does it count: an older generation's kernels are taken as no faster than
#: NCCL's model of them, so LL128 (32 against NCCL's 40.6) keeps NCCL's 14.0 + 1.9
AMPERE_NVLINK_LATENCY = {"LL": (10.6, 0.73), "LL128": (14.0, 1.9), "Simple": (14.8, 4.8)}


@dataclass(frozen=True)
class ProtocolModel:
    """How a protocol uses the wire: ``efficiency`` data bytes per byte sent,
    ``hop_latency_us`` added to every hop's α, ``base_us`` once per call, and
    ``granule_bytes`` the wire bytes a receiver must hold before it can forward
    them (``None``: one FIFO slot, as Simple waits for whole slots; LL and
    LL128 forward each line as its flag arrives, one line per thread).
    ``threadblock_bw``: this protocol's own ceiling on one threadblock's wire
    rate (GB/s), on top of the machine's; ``None``: only the machine's.
    """

    name: str
    efficiency: float
    hop_latency_us: float
    base_us: float
    granule_bytes: int | None = None
    threadblock_bw: float | None = None


#: the runtimes' protocols (MSCCL/NCCL): LL 8 data bytes per 16, LL128 120 per 128
PROTOCOLS = {
    "LL": ProtocolModel("LL", 0.5, 0.0, 6.6, 512 * 16),         # 512 threads x 16 B lines
    "LL128": ProtocolModel("LL128", 120 / 128, 1.3, 14.0, 640 * 16),  # 640 threads x 16 B
    "Simple": ProtocolModel("Simple", 1.0, 2.8, 8.4, None),
}


@dataclass(frozen=True)
class Resource:
    """Something transfers share: a link direction, a switch port, a NIC direction."""

    name: str
    bw_GBps: float


@dataclass(frozen=True)
class Path:
    """How ``src`` reaches ``dst``: resources used, summed α (µs), narrowest β (GB/s)."""

    src: int
    dst: int
    resources: tuple[int, ...]
    alpha_us: float
    bw_GBps: float
    hops: int
    #: how many of the hops cross NVLink (a GPU generation's kernels pay their own latency
    #: per NVLink step: :attr:`Machine.generation_latency`)
    nvlink_hops: int = 0


@dataclass
class Machine:
    """α/β machine model of one topology (see module docstring).

    ``resources`` grows as paths are asked for; ``path(src, dst)`` is cached.
    ``bw_scale`` multiplies every resource's bandwidth (what-if studies).
    """

    name: str
    ngpus: int
    protocols: dict[str, ProtocolModel]
    threadblock_bw: float | None = None
    memory_bw: float = DEFAULT_MEMORY_BW
    bw_scale: float = 1.0
    network_latency_us: float = NETWORK_LATENCY_US
    #: host time per kernel launch (:data:`LAUNCH_US`): what a process driving several GPUs
    #: adds per further GPU (:meth:`launch_overhead_us`); calibration fits it apart from α
    launch_us: float = LAUNCH_US
    #: the share of its bandwidth NCCL's own algorithms reach per protocol, and RCCL's MSCCL
    #: kernels (key ``MSCCL``), on top of ``bw_scale`` (``bandwidth scale KEY X``, which
    #: calibration writes; ``simulate nccl`` applies them); missing keys: 1
    bw_shares: dict = field(default_factory=dict)
    #: RCCL's built-in MSCCL kernels' own figures, where calibration fitted them (``launch
    #: MSCCL T``: key ``launch``; ``msccl P base T``: key P, their fixed cost per call)
    msccl: dict = field(default_factory=dict)
    #: back-to-back calls of a process driving several GPUs overlap its launches with the
    #: GPUs' work (``launch T overlapped``): :meth:`launched_us`
    launch_overlapped: bool = False
    #: µs each NVLS pipeline piece pays on top of its bytes (``nvls step T``, which
    #: calibration writes; ``simulate nccl`` applies it); None: NCCL's nvlsEfficiency
    nvls_step_us: float | None = None
    #: per protocol, the most one GPU puts on the wire with it, all its threadblocks together
    #: (GB/s): NCCL's LL and LL128 limits are totals per GPU, not per threadblock
    gpu_protocol_bw: dict = field(default_factory=dict)
    #: the threadblock limit holds per (rank, channel), shared by the channel's threadblocks,
    #: as NCCL runs one CTA per channel (its tree splits it between up and down)
    channel_threadblocks: bool = False
    #: per protocol, the (fixed µs, µs per NVLink hop) the GPU generation's kernels take
    #: beyond the protocol's figures (:func:`generation_latency`): every program pays them,
    #: NCCL's own and custom ones alike, on top of the file's or calibration's figures
    generation_latency: dict = field(default_factory=dict)
    resources: list[Resource] = field(default_factory=list)
    topology: object = field(default=None, repr=False)
    _paths: dict = field(default_factory=dict, repr=False)
    _res_index: dict = field(default_factory=dict, repr=False)
    _nics_of: dict = field(default_factory=dict, repr=False)
    #: unique per instance (copies included), so caches keyed by it never mix machines
    key: int = field(init=False, repr=False, compare=False,
                     default_factory=itertools.count().__next__)

    def protocol(self, name: str) -> ProtocolModel:
        """The :class:`ProtocolModel` of ``name`` (``Simple``, ``LL``, ``LL128``)."""
        try:
            return self.protocols[name]
        except KeyError:
            raise SimulationError(f"machine '{self.name}' has no model of protocol {name!r}; "
                                  f"known: {', '.join(self.protocols)}") from None

    def fixed_us(self, protocol: str) -> float:
        """What one call with ``protocol`` costs beyond its hops and bytes (µs): the
        protocol's fixed cost and the GPU generation's on top of it."""
        return self.protocol(protocol).base_us + self.generation_latency.get(protocol,
                                                                              (0.0, 0.0))[0]

    def hop_alpha_us(self, path: Path, protocol: str) -> float:
        """α of ``path`` as ``protocol`` runs it (µs): the links', the protocol's latency per
        hop, and the GPU generation's per NVLink hop."""
        gen = self.generation_latency.get(protocol, (0.0, 0.0))[1]
        return (path.alpha_us + self.protocol(protocol).hop_latency_us * path.hops
                + gen * path.nvlink_hops)

    def path(self, src: int, dst: int) -> Path:
        """The :class:`Path` from rank ``src`` to rank ``dst``."""
        key = (src, dst)
        p = self._paths.get(key)
        if p is None:
            p = self._paths[key] = self._route(src, dst)
        return p

    def threadblock_limit(self, protocol: str) -> float | None:
        """The most one threadblock of ``protocol`` puts on the wire (GB/s); None: no limit."""
        own = self.protocol(protocol).threadblock_bw
        limits = [b for b in (self.threadblock_bw, own) if b is not None]
        return min(limits) if limits else None

    def gpu_limit(self, protocol: str) -> float | None:
        """The most one GPU puts on the wire with ``protocol`` in all (GB/s); None: no limit."""
        bw = self.gpu_protocol_bw.get(protocol)
        return None if bw is None else bw * self.bw_scale

    def same_machine(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """Per pair of ranks, whether both sit in one machine (their bytes stay on its
        NVLink or xGMI; the others leave through NICs)."""
        if self.topology is None:
            return np.ones(len(src), dtype=bool)
        node = np.array([self.topology.node_of(r) for r in range(self.ngpus)])
        return node[src] == node[dst]

    def launch_overhead_us(self, gpus_per_process: int = 1, msccl: bool = False) -> float:
        """What launching from one process per ``gpus_per_process`` GPUs adds to a call:
        the last GPU's kernel starts ``gpus_per_process - 1`` launches after the first
        (``msccl``: RCCL's MSCCL kernels, whose host side also fills a work FIFO entry per
        threadblock, at their own launch time where one was fitted)."""
        each = self.msccl.get("launch", self.launch_us) if msccl else self.launch_us
        return max(0, int(gpus_per_process) - 1) * each

    def launched_us(self, gpu_us: float, gpus_per_process: int = 1,
                    msccl: bool = False) -> float:
        """A call whose GPUs take ``gpu_us`` once all run, launched ``gpus_per_process`` per
        process: the launches added (the last GPU starts N-1 launches after the first), or,
        where they overlap (``launch_overlapped``: the process issues the next call's N
        launches while the GPUs run this one, as nccl-tests' timed loop of back-to-back
        calls lets it), the longer of the GPUs' time and the N launches."""
        if gpus_per_process <= 1 or not self.launch_overlapped:
            return gpu_us + self.launch_overhead_us(gpus_per_process, msccl)
        n = int(gpus_per_process)
        return max(gpu_us, n * self.launch_overhead_us(2, msccl))

    def with_bandwidth_scale(self, factor: float) -> "Machine":
        """A copy whose every resource (and threadblock limit) is ``factor`` times as fast."""
        protos = {k: p if p.threadblock_bw is None else
                  replace(p, threadblock_bw=p.threadblock_bw * factor)
                  for k, p in self.protocols.items()}
        return replace(self, bw_scale=self.bw_scale * factor, resources=[], _paths={}, _nics_of={},
                       _res_index={}, protocols=protos, threadblock_bw=None
                       if self.threadblock_bw is None else self.threadblock_bw * factor)

    def _resource(self, name: str, bw: float) -> int:
        k = self._res_index.get(name)
        if k is None:
            bw *= self.bw_scale
            k = self._res_index[name] = len(self.resources)
            self.resources.append(Resource(name, float(bw)))
        return k

    def _route(self, src: int, dst: int) -> Path:
        for r in (src, dst):
            if not 0 <= r < self.ngpus:
                raise SimulationError(f"rank {r} is not on machine '{self.name}' "
                                      f"({self.ngpus} GPUs)")
        res: list[int] = []
        direct = self._hop(src, dst, res)
        if direct is not None:
            alpha, hops, pairs = direct, 1, [(src, dst)]
        else:
            ranks = self.topology.rank_route(src, dst)
            if ranks is None:
                raise SimulationError(f"machine '{self.name}' has no path from rank {src} "
                                      f"to rank {dst}")
            res.clear()
            pairs = list(zip(ranks, ranks[1:]))
            alpha = sum(self._hop(a, b, res) for a, b in pairs)
            hops = len(ranks) - 1
        bw = min(self.resources[k].bw_GBps for k in res)
        return Path(src, dst, tuple(res), alpha, bw, hops,
                    sum(nvlink_link(self.topology, a, b) for a, b in pairs))

    def _hop(self, a: int, b: int, res: list[int]) -> float | None:
        """Append the resources of one hop a -> b to ``res`` and return its α; None when
        a and b are neither linked nor on different machines with NICs."""
        g = self.topology.graph
        if g.has_edge(a, b):
            e = g.edges[a, b]
            via = e.get("via")
            if via:
                sw = g.nodes[via]
                port = sw.get("port_bw") or e["bw"]
                res.append(self._resource(f"switch {via} port {a} out", port))
                res.append(self._resource(f"switch {via} port {b} in", port))
                if sw.get("total_bw"):
                    res.append(self._resource(f"switch {via} total", sw["total_bw"]))
            else:
                res.append(self._resource(f"link {a}->{b} ({e.get('kind')})", e["bw"]))
            return _latency(e.get("kind") or "link", e.get("latency"))
        if g.nodes[a].get("node") == g.nodes[b].get("node"):
            return None
        na, nb = self._nics(a), self._nics(b)
        if not na or not nb:
            return None
        # the fastest NIC of each end, as Topology.route picks them
        out = max(na, key=lambda v: g.nodes[v]["bw"])
        into = max(nb, key=lambda v: g.nodes[v]["bw"])
        res.append(self._resource(f"nic {out} out", g.nodes[out]["bw"]))
        # a leaf/spine fabric: leaf up, spine(s), leaf down, and a latency per switch hop
        from msccl_py.topologies.fabric import nic_route
        between, switch_us = nic_route(self.topology, out, into)
        res.extend(self._resource(h.name, h.bw_GBps) for h in between)
        res.append(self._resource(f"nic {into} in", g.nodes[into]["bw"]))
        return self.network_latency_us + switch_us

    def _nics(self, rank: int) -> list:
        nics = self._nics_of.get(rank)
        if nics is None:
            nics = self._nics_of[rank] = self.topology.nics_of(rank)
        return nics


def nvlink_link(topology, a: int, b: int) -> bool:
    """Whether ranks ``a`` and ``b`` are joined by NVLink, directly or through an NVSwitch
    (the switch's ``link`` kind where it states one)."""
    g = topology.graph
    if not g.has_edge(a, b):
        return False
    e = g.edges[a, b]
    kind = e.get("kind") or ""
    if e.get("via"):
        kind = g.nodes[e["via"]].get("link") or kind
    return str(kind).lower().startswith("nvlink")


def generation_latency(topo) -> dict[str, tuple[float, float]]:
    """Per protocol, the (fixed µs, µs per NVLink step) NCCL's kernels take on ``topo``'s GPU
    generation beyond NCCL's constants, which are one set for every generation and match
    Hopper: on Ampere GPUs joined by NVLink, :data:`AMPERE_NVLINK_LATENCY` less NCCL's
    figures (:data:`PROTOCOLS` and NVLink's 0.6 µs hop), where that is positive; nothing
    elsewhere. MSCCL's kernels are NCCL's kernels with other schedules, so custom
    programs pay the same: a comparison with NCCL compares like with like."""
    from msccl_py.topologies.gpus import gpu_model
    model = gpu_model(getattr(topo, "model", None))
    if model is None or not 80 <= model.arch < 90:
        return {}
    one = topo.ranks_of_node(0)
    if len(one) < 2 or not nvlink_link(topo, one[0], one[1]):
        return {}
    hop = LINK_LATENCY_US["nvlink"]
    out = {}
    for name, (base, step) in AMPERE_NVLINK_LATENCY.items():
        p = PROTOCOLS[name]
        extra = (max(0.0, base - p.base_us), max(0.0, step - hop - p.hop_latency_us))
        if any(extra):
            out[name] = extra
    return out


def _latency(kind: str, given: float | None) -> float:
    if given is not None:
        return float(given)
    low = kind.lower()
    for prefix, value in LINK_LATENCY_US.items():
        if low.startswith(prefix):
            return value
    return DEFAULT_LINK_LATENCY_US


def machine_model(topology, *, threadblock_bw: float | None = None,
                  protocols: dict[str, ProtocolModel] | None = None) -> Machine:
    """The :class:`Machine` of a Topology (or a topology name or path).

    Parameters the topology file sets (``threadblock``, ``threadblock P``,
    ``memory``, ``protocol``) override the defaults; keyword arguments override both.
    """
    from msccl_py.topologies import resolve
    topo = resolve(topology)
    if topo.bandwidth_unit != "GB/s":
        where = f" ({topo.source})" if getattr(topo, "source", None) else ""
        raise SimulationError(f"topology '{topo.name}'{where} counts links but gives them no "
                              f"speed, so it cannot be timed: copy the file and give its link "
                              f"type a bandwidth (e.g. 'linktype link 50 GB/s'), or simulate a "
                              f"machine that has one (mi250, mi300x, dgx1, ...)")
    meta = topo.graph.graph
    protos = dict(PROTOCOLS)
    for name, (lat, base) in (meta.get("protocols") or {}).items():
        p = protos[name]
        protos[name] = replace(p, hop_latency_us=p.hop_latency_us if lat is None else lat,
                               base_us=p.base_us if base is None else base)
    for name, bw in (meta.get("protocol_threadblock") or {}).items():
        protos[name] = replace(protos[name], threadblock_bw=bw)
    protos.update(protocols or {})
    tb = threadblock_bw if threadblock_bw is not None else meta.get("threadblock_bw")
    mem = meta.get("memory_bw") or DEFAULT_MEMORY_BW
    fabric = [d.get("latency") for _, d in topo.graph.nodes(data=True)
              if d.get("kind") == "fabric"]
    net = fabric[0] if fabric and fabric[0] is not None else NETWORK_LATENCY_US
    # what calibration writes: a fitted launch time and a share of every bandwidth
    launch = meta.get("launch_us")
    m = Machine(topo.name, topo.num_nodes(), protos, tb, mem, network_latency_us=net,
                gpu_protocol_bw=gpu_protocol_totals(topo), topology=topo,
                launch_us=LAUNCH_US if launch is None else launch,
                bw_shares=dict(meta.get("bandwidth_shares") or {}),
                msccl=dict(meta.get("msccl") or {}),
                launch_overlapped=bool(meta.get("launch_overlapped")),
                nvls_step_us=meta.get("nvls_step_us"), generation_latency=generation_latency(topo))
    scale = meta.get("bandwidth_scale")
    return m if scale in (None, 1.0) else m.with_bandwidth_scale(scale)


def amd_host(topology) -> bool:
    """Whether the machine's host CPUs are AMD's (the file's ``cpu amd``): NCCL reads the
    vendor (``ncclTopoCpuType``) for its LL limit and network overhead across nodes."""
    return getattr(topology, "cpu_vendor", None) == "amd"


def nccl_ll_max_bw(topo, gen: int) -> float:
    """NCCL's llMaxBws entry for ``topo`` (GB/s): on one node its GPU generation's row
    (``gen``); across nodes the host CPU vendor's ("AMD-N2/AMD-N4": ``index1``, the second
    row for AMD hosts, the first for the rest), in the column of 1, 2 or more nodes."""
    nodes = getattr(topo, "num_machines", 1) or 1
    row = gen if nodes == 1 else int(amd_host(topo))
    return NCCL_LL_MAX_BW[row][min(nodes, 3) - 1]


def gpu_protocol_totals(topo, simple: bool = False) -> dict[str, float]:
    """Wire GB/s one GPU moves per protocol in all, as NCCL budgets its GPU generation
    (``model``): Simple at NCCL's NVLink budget (``SM*_NVLINK_BW`` x links: 370.8 GB/s on
    H100, the "~370GB/s" effective NVLink rate after protocol overhead NCCL's maintainers
    quote, NVIDIA/nccl-tests issue 212), LL128 at 0.92 of it (x128/120 on the wire), LL at
    ``llMaxBws`` (x2 on the wire); on AMD Instinct GPUs Simple at RCCL's budget per xGMI
    link. So threadblocks beyond NCCL's channels do not fill the datasheet link. None for
    GPUs neither has a figure for. On NVIDIA GPUs Simple always has its total: an
    all-pairs program with more threadblocks than NCCL's channels (4 instances: 28
    sending) otherwise reached 427 GB/s busbw on dgx-h100, above what H100 SMs put on
    NVLink. On AMD GPUs Simple only with ``simple`` (``simulate nccl`` times RCCL's MSCCL
    kernels so); ``machine_model`` leaves it to the xGMI links, which the bounds and
    synthesis are stated against there."""
    import re
    from msccl_py.topologies.gpus import generation, gpu_model
    from msccl_py.topologies.rings import NCCL_NVLINK_BW
    model = gpu_model(getattr(topo, "model", None))
    if model is None:
        name = str(getattr(topo, "model", None) or "").lower()
        width = next((bw for key, bw in RCCL_XGMI_BW if re.search(rf"\b{key}\d", name)), None)
        g = topo.graph
        links = sum(int(g.edges[0, b].get("count") or 1) for b in g.successors(0)
                    if isinstance(b, int) and str(g.edges[0, b].get("kind") or "").lower()
                    .startswith(("xgmi", "infinity"))) if 0 in g else 0
        return {"Simple": width * links} if simple and width and links else {}
    arch = model.arch
    out = {"LL": 2 * nccl_ll_max_bw(topo, generation(arch))}
    if model.nvlink_GBps:
        budget = model.nvlinks * next(bw for cc, bw in NCCL_NVLINK_BW if arch >= cc)
        out["Simple"] = budget
        out["LL128"] = NCCL_LL128_SHARE * budget * 128 / 120
    return out
