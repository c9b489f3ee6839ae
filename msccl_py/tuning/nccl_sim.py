"""``simulate nccl``: what NCCL (RCCL on AMD) itself runs at each size, and how long it takes.

The choice is NCCL's (:mod:`msccl_py.tuning.nccl_model`): algorithm,
protocol and channels as its tuning code picks them. The time is NCCL's own
formula for that choice, ``latency + bytes / bandwidth``, on the machine
simulated rather than on NCCL's constants alone:

* the latency's hardware figures scale with the machine's: the intra-node
  ones by the machine's hop α plus its protocol hop latency over the same
  with NCCL's figures (0.6 µs NVLink, 1.0 PCIe; +1.3 LL128, +2.8 Simple), the
  network ones by its network latency over NCCL's 2.7 µs, the base per
  protocol by its fixed cost over NCCL's ring base (6.6 / 14 / 8.4 µs), so a
  calibrated machine moves them; on Ampere NVLink machines each also pays the
  generation's measured extra fixed cost and NVLink step beyond NCCL's
  constants (the machine's ``generation_latency``,
  :func:`~msccl_py.simulate.machine.generation_latency`, NVIDIA/nccl-tests
  issue #123), which the event engine charges custom programs too;
* the bandwidth is NCCL's for the channels the call really runs on (NCCL
  prices every call at all its graph's channels, then runs small ones on
  fewer of the communicator's, twice the graph's: each is one threadblock at
  the graph channel's speed on one node, half a graph channel's NIC share
  across nodes), times the machine's
  bandwidth scale and its share for the protocol (``bandwidth scale P X``;
  RCCL's MSCCL kernels: ``bandwidth scale MSCCL X``); NVLS moves each
  channel's share per NVLS head in NCCL's pieces for the size
  (:func:`~msccl_py.tuning.nccl_chunks.nvls_chunk`) through three stages, so k
  pieces take k + 2 piece times: on one node NCCL's NVLS kernel runs scatter,
  reduce-and-multicast and gather warps (``src/device/all_reduce.h``, the
  one-node NVLS path without registered buffers, as nccl-tests runs it);
  NVLSTree's reduce, network and broadcast stages pipeline the same way;
  where calibration fitted a time per piece (``nvls step T``) each piece pays
  it, and on one node the bytes move at NCCL's NVLS figure before its
  ``nvlsEfficiency`` (which stands in for that cost); a tree's
  store-and-forward hops (Simple's every hop, the network hops of LL and
  LL128) each pay the transfer of one of NCCL's pieces (:func:`_tree_fill`);
* the latency is NCCL's but for what the machine pays: a ring pays every network
  crossing of its chain (:func:`~msccl_py.tuning.nccl_model.ring_crossings`), and
  a machine that states a network step below its plugin's report pays its own;
* a process that drives several GPUs (nccl-tests ``-g N``) launches their
  kernels one after another: ``Machine.launch_overhead_us`` (RCCL's MSCCL
  kernels at their own launch time where calibration fitted one, ``launch
  MSCCL T``, and their own fixed cost, ``msccl P base T``).

A protocol's share is of NCCL's budget for all of a GPU's channels together
(LL's ``llMaxBws`` is a total): a call NCCL runs on fewer channels runs each
at NCCL's per-channel speed, up to that share of the total.

On AMD Instinct machines the choice and the figures are RCCL's
(:mod:`msccl_py.tuning.rccl`), and where RCCL runs one of its built-in MSCCL
algorithms (8 MI300X, small allreduces) that algorithm is timed on the event
engine (:func:`msccl_py.simulate.simulate`) as the library's
``allreduce_allpairs``. alltoall is NCCL's send/receive to every peer, which
NCCL's model does not price: :func:`p2p_time`.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import asdict, dataclass, field
from typing import Any

from msccl_py.errors import MscclError
from msccl_py.simulate.machine import PROTOCOLS
from msccl_py.simulate.results import JSON_KEYS, Result, busbw_factor, parse_sizes
from msccl_py.topologies import networks
from msccl_py.tuning import nccl_model as nm
from msccl_py.tuning.nccl_chunks import nvls_chunk, tree_chunk
from msccl_py.tuning.nccl_fabric import fabric_share
from msccl_py.tuning.rccl import (BASE_LAT as RCCL_BASE, amd_arch, msccl_pick, rccl_entries)

#: NCCL's figures the machine's are compared with: LL hop α per link class, network α,
#: ring base per protocol (tuning.cc hwLatencies / baseLatencies)
REF_HOP_US = {"nvlink": 0.6, "pci": 1.0}
REF_NET_US = 2.7
REF_BASE_US = (6.6, 14.0, 8.4)
#: RCCL's xGMI LL hop (tuning_model_0) and its base latencies
RCCL_REF_HOP_US = 0.8
#: per topology, the event engine's times of RCCL's MSCCL kernels (:func:`_rccl`)
_ENGINE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class NcclResult(Result):
    """A :class:`~msccl_py.simulate.Result` with what NCCL ran: ``algorithm`` (Ring, Tree,
    NVLS, NVLSTree, MSCCL, P2P), ``channels``, and NCCL's own model time (µs)."""

    algorithm: str = ""
    channels: int = 0
    model_us: float = 0.0

    def as_dict(self) -> dict:
        d = asdict(self)
        return {k: d[k] for k in JSON_KEYS + ("algorithm", "protocol", "channels")}


@dataclass(frozen=True)
class Scales:
    """The machine's latencies over NCCL's: intra-node hop per protocol, network, base per
    protocol; its bandwidth scale (launches: ``Machine.launched_us``)."""

    intra: tuple[float, float, float]
    net: float
    base: tuple[float, float, float]
    bw: float
    #: the machine's share per protocol of NCCL's own algorithms and for RCCL's MSCCL kernels
    shares: dict = field(default_factory=dict)
    #: the network's own latency per step over what its plugin reports to NCCL
    plugin: float = 1.0
    #: what each network crossing costs beyond NCCL's figures, unseen by its choice (µs;
    #: ``NetworkKind.step_us``, TCPXO's measured receive path)
    step: float = 0.0
    #: µs each NVLS piece pays on top of its bytes (``nvls step T``, calibrated; None:
    #: NCCL's nvlsEfficiency stands in for it)
    nvls_step: float | None = None

    def share(self, key: str) -> float:
        return self.shares.get(key, 1.0)


def _scales(machine: Any, topology: Any, intra: str, amd: bool) -> Scales:
    if machine is None:
        return Scales((1.0, 1.0, 1.0), 1.0, (1.0, 1.0, 1.0), 1.0)
    n = topology.num_nodes()
    local = topology.ranks_of_node(0) if nm.nodes_of(topology) > 1 else list(range(n))
    hop = None
    if len(local) > 1:
        p = machine.path(local[0], local[1])
        hop = p.alpha_us / max(1, p.hops)
    ref = RCCL_REF_HOP_US if amd and intra == "nvlink" else REF_HOP_US[intra]
    # a GPU generation whose kernels NCCL's constants do not describe adds its own extra
    # fixed cost and per-step latency to the machine's (fitted or default) figures, as the
    # event engine adds them to every program's
    gen = machine.generation_latency if intra == "nvlink" and not amd else {}
    extra = [gen.get(name, (0.0, 0.0)) for name in nm.PROTOCOLS]
    base = tuple((machine.protocol(name).base_us + extra[k][0]) / REF_BASE_US[k]
                 for k, name in enumerate(nm.PROTOCOLS))
    # per protocol: (hop α + the protocol's hop latency) over the same with NCCL's figures,
    # so a fitted α or a fitted protocol latency moves it; exactly 1 with the defaults
    intra = tuple((hop + machine.protocol(name).hop_latency_us + extra[k][1])
                  / (ref + PROTOCOLS[name].hop_latency_us) if hop else 1.0
                  for k, name in enumerate(nm.PROTOCOLS))
    # the machine's network step is NCCL's 2.7 us plus the network's own latency, which is
    # what the plugin reports (added apart, as tuning.cc adds it) unless the machine states
    # a lower one (p5: aws-ofi-nccl's 75 us report steers NCCL's choice, its tuner's
    # measured 20 us is the time); what lies above the plugin's scales NCCL's figures
    # a kind's measured crossing cost (TCPXO) is part of the machine's step above NCCL's
    # 2.7 us (a step stated lower gives it up first) and is paid per crossing, apart
    net = networks.of_topology(topology)
    plugin = net.plugin_latency_us if net is not None else 0.0
    step = (min(net.step_us, max(0.0, machine.network_latency_us - REF_NET_US))
            if net is not None else 0.0)
    lat = machine.network_latency_us - step
    own = min(plugin, max(0.0, lat - REF_NET_US))
    return Scales(intra, max(0.0, lat - own) / REF_NET_US, base, machine.bw_scale,
                  dict(machine.bw_shares), own / plugin if plugin else 1.0, step,
                  machine.nvls_step_us)


def _resolve(topology: Any, nodes: int):
    from msccl_py.topologies import Topology, load
    if isinstance(topology, Topology):
        if nodes > 1 and nm.nodes_of(topology) == 1:
            return load(topology.name, nodes=nodes)
        return topology
    return load(str(topology), nodes=nodes if nodes > 1 else None)


def simulate_nccl(topology: Any, collective: str = "allreduce", sizes: Any = "1KiB:1GiB", *,
                  nodes: int = 1, gpus_per_process: int = 1, protocol: str | None = None,
                  machine: Any = None) -> list[NcclResult]:
    """NCCL's (RCCL's) own choice and time per size of ``collective`` on ``topology`` (a
    Topology or a machine name or file; ``nodes`` copies), launched ``gpus_per_process``
    GPUs per process, ``protocol`` forced as ``NCCL_PROTO`` forces it; ``machine`` the
    :class:`~msccl_py.simulate.Machine` whose latencies, bandwidth scale and launch cost
    to use (default: the topology's own).

    >>> r = simulate_nccl("dgx-h100", sizes=[1 << 30])[0]
    >>> r.algorithm, r.protocol, r.channels, round(r.busbw_GBps)
    ('NVLS', 'Simple', 16, 459)
    """
    from msccl_py.simulate import machine_model
    if collective not in nm.COLLECTIVES:
        raise MscclError(f"simulate nccl runs {', '.join(nm.COLLECTIVES)}, not "
                         f"{collective!r}")
    if protocol is not None and protocol not in nm.PROTOCOLS:
        raise MscclError(f"unknown protocol {protocol!r}; NCCL's are "
                         f"{', '.join(nm.PROTOCOLS)}")
    if gpus_per_process < 1:
        raise MscclError(f"--gpus-per-process must be at least 1, got {gpus_per_process}")
    topo = _resolve(topology, nodes)
    m = machine if machine is not None else machine_model(topo)
    if m.ngpus != topo.num_nodes():
        raise MscclError(f"machine '{m.name}' has {m.ngpus} GPUs but the topology "
                         f"'{topo.name}' has {topo.num_nodes()}")
    amd = amd_arch(topo) is not None
    ring = nm.ring_graph(topo)
    sc = _scales(m, topo, ring.intra, amd)
    n = topo.num_nodes()
    factor = busbw_factor(collective, n)
    out = []
    protos = (protocol,) if protocol else None
    for nbytes in parse_sizes(sizes):
        if collective == "alltoall":
            t, what = p2p_time(topo, nbytes, sc), ("P2P", "Simple", ring.channels, 0.0)
        elif amd:
            t, what = _rccl(topo, collective, nbytes, sc, protos, m)
        else:
            t, what = _nccl(topo, collective, nbytes, sc, protos)
        t = m.launched_us(t, gpus_per_process, msccl=what[0] == "MSCCL")
        algbw = nbytes / (t * 1e3)
        algo, proto, ch, model_us = what
        out.append(NcclResult(nbytes, t, algbw, algbw * factor, f"NCCL {algo}/{proto} x{ch}",
                              proto, 1, 0.0, algo, ch, model_us))
    return out


def nccl_time(topology: Any, collective: str, nodes: int | None = None):
    """``nbytes -> µs`` of what NCCL itself runs (:func:`simulate_nccl`), the baseline
    synthesis measures a schedule MSCCL would not run against."""
    def time_us(nbytes: int) -> float:
        return simulate_nccl(topology, collective, [nbytes], nodes=nodes or 1)[0].time_us
    return time_us


def _nccl(topo, collective: str, nbytes: int, sc: Scales, protos, algos=None):
    choice = nm.choose(topo, collective, nbytes, protocols=protos, algorithms=algos)
    algo, proto = choice.algorithm, choice.protocol
    # the call's channels are the communicator's (twice the graph's), each a share of a
    # graph channel: NCCL prices the graph's channels
    share = nm.ring_graph(topo).channels / nm.comm_channels(topo) if nm.nodes_of(topo) > 1 else 1.0
    table = nm.nccl_tune(topo, collective, channels=None if algo.startswith("NVLS") else
                         choice.channels * share, fabric=True)
    entry = table[algo, proto]
    p = nm.PROTOCOLS.index(proto)
    lat = _scaled_latency(topo, collective, algo, p, sc)
    # the protocol's share is of NCCL's budget for all the GPU's channels together (LL's is
    # llMaxBws, a total): a call on fewer channels runs each at NCCL's per-channel speed, up
    # to that share of the total
    full = nm.nccl_tune(topo, collective)[algo, proto].bandwidth
    bw = min(entry.bandwidth, full * sc.share(proto)) * sc.bw
    if algo == "Tree" and collective == "allreduce" and nbytes >= 64:
        log_size = int(math.log2(nbytes >> 6))
        if log_size < 23:
            bw *= nm.TREE_CORRECTION[p][log_size]
    fill = 0.0
    if algo == "Tree":
        fill = _tree_fill(topo, proto, nbytes, choice.channels, sc)
    if algo.startswith("NVLS"):
        # each channel's heads (one per GPU of the node) move their shares one piece after
        # another (NCCL's chunk for the size) through three stages (one node: scatter,
        # reduce-multicast, gather; NVLSTree: reduce, network, broadcast): k pieces take
        # k + 2 piece times
        heads = topo.num_nodes() // nm.nodes_of(topo)
        k = math.ceil(nbytes / (choice.channels * heads
                                * nvls_chunk(algo, nbytes, choice.channels, heads)))
        bw *= k / (k + 2)
        # a calibrated machine's pieces each pay a fixed time (``nvls step T``: the switch's
        # reduce and multicast synchronise per piece) instead of NCCL's nvlsEfficiency, its
        # stand-in for that cost at full-size pieces; on one node the bytes then move at
        # NCCL's NVLink figure before it
        if sc.nvls_step is not None:
            lat += (k + 2) * sc.nvls_step
            if nm.nodes_of(topo) == 1:
                bw /= nm.NVLS_EFFICIENCY[nm.generation(nm.arch_of(topo))]
    if algo == "Ring" and proto == "Simple" and nm.nodes_of(topo) > 1 \
            and collective == "allreduce" \
            and nbytes / (nm.ring_graph(topo).channels * topo.num_nodes()) >= 64:
        lat *= nm.RING_PLATEAU[(nm.arch_of(topo) or 80) >= 80]
    return lat + fill + nbytes / (1000 * bw), (algo, proto, choice.channels, choice.model_us)


def _tree_fill(topo, proto: str, nbytes: int, channels: int, sc: Scales) -> float:
    """What a tree's pipeline fill adds (µs) to tuning.cc's figure: a hop that forwards
    a piece only once all of it has arrived (store and forward) holds the call by one
    piece's transfer time. Simple waits for each step's tail on every hop; LL and LL128
    forward line by line within a node, but the network proxy posts a step only once
    the GPU has filled it (``sendProxyProgress``, ``src/transport/net.cc``), so their
    network hops are store and forward too. A piece is NCCL's for the size
    (:func:`~msccl_py.tuning.nccl_chunks.tree_chunk`), or each channel's share of a
    smaller call; it moves at its channel's share of the hop's graph speed."""
    nodes = nm.nodes_of(topo)
    ppn = topo.num_nodes() / nodes
    graph = nm.tree_graph(topo)
    share = graph.channels / nm.comm_channels(topo) * sc.bw
    piece = min(tree_chunk(proto, nbytes, channels, nodes, ppn),
                math.ceil(nbytes / channels)) / PROTOCOLS[proto].efficiency
    net_hops = 2 * int(math.log2(nodes))
    t = net_hops * piece / (1000 * graph.bw_inter * share) if nodes > 1 else 0.0
    if proto == "Simple":
        t += 2 * (ppn - 1) * piece / (1000 * graph.bw_intra * share)
    return t


def candidate_times(topology: Any, collective: str, nbytes: int, *, nodes: int = 1,
                    machine: Any = None) -> dict[tuple[str, str], tuple[float, int]]:
    """Predicted (time µs, channels) of every (algorithm, protocol) NCCL can run the call
    with on an NVIDIA machine (each as if NCCL_ALGO / NCCL_PROTO forced it), at NCCL's
    channel count for it."""
    from msccl_py.simulate import machine_model
    topo = _resolve(topology, nodes)
    m = machine if machine is not None else machine_model(topo)
    sc = _scales(m, topo, nm.ring_graph(topo).intra, False)
    out = {}
    for algo, proto in nm.nccl_tune(topo, collective):
        t, what = _nccl(topo, collective, nbytes, sc, (proto,), (algo,))
        out[algo, proto] = (t, what[2])
    return out


def _scaled_latency(topo, collective: str, algo: str, p: int, sc: Scales) -> float:
    """tuning.cc's latency with the machine's hop, network and base latencies."""
    gr = nm.nvls_graph(topo) if algo.startswith("NVLS") else nm.ring_graph(topo)
    n, nodes = topo.num_nodes(), nm.nodes_of(topo)
    steps = (2 * (n - 1) if collective == "allreduce" else n - 1
             if collective in ("allgather", "reduce_scatter") else n)
    net = networks.of_topology(topo)
    parts = nm.latency_parts(algo, p, collective, gr, n, nodes, steps,
                             plugin_us=net.plugin_latency_us if net is not None else 0.0,
                             net_overhead=nm.net_overhead(topo))
    inter, plugin = parts[2], parts[3]
    hops = crossings = nm.net_hops(algo, collective, n, nodes)
    if algo == "Ring" and hops:
        # the time pays every crossing of the ring's critical path, not tuning.cc's count
        crossings = nm.ring_crossings(collective, n, nodes)
        inter, plugin = inter * crossings / hops, plugin * crossings / hops
    return (parts[0] * sc.base[p] + parts[1] * sc.intra[p] + inter * sc.net
            + plugin * sc.plugin + crossings * sc.step)


def _rccl(topo, collective: str, nbytes: int, sc: Scales, protos, m):
    pick = msccl_pick(collective, nbytes, nbytes // 4, topo) if protos is None else None
    if pick is not None:
        from dataclasses import replace
        from msccl_py import library
        from msccl_py.simulate import simulate
        from msccl_py.simulate.machine import gpu_protocol_totals
        # the event engine's time less the fixed cost depends on neither the fixed costs nor
        # the launch: calibration, which moves those, reruns no simulation for them
        key = (pick, nbytes, m.bw_scale, sc.share("MSCCL"), m.threadblock_bw, m.memory_bw,
               m.channel_threadblocks, tuple(sorted(m.gpu_protocol_bw.items())),
               tuple(sorted((k, v.hop_latency_us, v.threadblock_bw)
                            for k, v in m.protocols.items())))
        per = _ENGINE.setdefault(topo, {})
        if key not in per:
            alg = library.compile(pick.program, topo.num_nodes(), instances=pick.instances,
                                  protocol=pick.protocol)
            # RCCL's kernels move no more than its xGMI budget per GPU, however many blocks
            mm = replace(m, gpu_protocol_bw={**m.gpu_protocol_bw,
                                             **gpu_protocol_totals(topo, simple=True)})
            if sc.share("MSCCL") != 1.0:
                mm = mm.with_bandwidth_scale(sc.share("MSCCL"))
            r = simulate(alg, mm, [nbytes], labels=False)[0]
            per[key] = r.time_us - mm.fixed_us(pick.protocol)
        # RCCL's MSCCL kernels pay RCCL's base latency (or their own fitted one: ``msccl P
        # base T``), not NCCL's fixed cost, nor the machine's fitted one for RCCL's ring: on
        # MI300X the ring's fixed cost at 8-512 B tells nothing about the MSCCL kernel's
        # (1 KiB - 256 KiB run 10 us below it)
        base = m.msccl.get(pick.protocol, RCCL_BASE[nm.PROTOCOLS.index(pick.protocol)])
        t = per[key] + base
        return t, ("MSCCL", pick.protocol, pick.instances, t)
    entries = rccl_entries(collective, nbytes, topo, protocols=protos or nm.PROTOCOLS)
    if not entries:
        raise MscclError(f"RCCL runs no algorithm with protocol {', '.join(protos)} for "
                         f"{collective} on '{topo.name}'")
    times = {k: lat + nbytes / (1000 * bw) for k, (lat, bw) in entries.items()}
    algo, proto = min(times, key=times.get)
    lat, bw = entries[algo, proto]
    p = nm.PROTOCOLS.index(proto)
    ch, _ = nm.channels_for(topo, algo, proto, nbytes)
    full = nm.ring_graph(topo).channels
    # the intra-node hops scale with the machine's α; RCCL's base with the machine's base
    lat = RCCL_BASE[p] * sc.base[p] + (lat - RCCL_BASE[p]) * sc.intra[p]
    # the share is of the budget of all channels together (as in _nccl)
    t = lat + nbytes / (1000 * bw * sc.bw * min(sc.share(proto), ch / full))
    return t, (algo, proto, ch, times[algo, proto])


def p2p_time(topo, nbytes: int, sc: Scales) -> float:
    """NCCL's all-to-all (a send and a receive to every peer, in one group), which its
    tuning model does not price: each GPU sends ``nbytes / n`` to every peer at once, at
    NCCL's ring budget per GPU within the node (channels x speed) and its NICs' share
    across nodes (less where a leaf/spine fabric's uplinks are busier:
    :func:`~msccl_py.tuning.nccl_fabric.fabric_share`), after one Simple step's latency
    (base + NVLink hop, + network hop)."""
    n, nodes = topo.num_nodes(), nm.nodes_of(topo)
    ppn = n // nodes
    ring = nm.ring_graph(topo if nodes == 1 else nm._one_node(topo))
    intra_bw = ring.channels * ring.bw_intra * sc.bw * sc.share("Simple")
    lat = nm.BASE_LAT["Ring"][2] * sc.base[2] + nm.HW_LAT[ring.intra]["Ring"][2] * sc.intra[2]
    chunk = nbytes / n
    t = (ppn - 1) * chunk / (1000 * intra_bw)
    if nodes > 1:
        nics, nic = nm._nic_bw(topo)
        inter_bw = nics * nic / ppn * sc.bw * sc.share("Simple")
        inter_bw *= fabric_share(topo, "P2P")[0]
        t = max(t, (n - ppn) * chunk / (1000 * inter_bw))
        lat += nm.HW_LAT["net"]["Ring"][2] * sc.net + sc.step
    return lat + t
