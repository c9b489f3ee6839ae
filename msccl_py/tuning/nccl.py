"""NCCL's own choice of algorithm, protocol and channel count per size, from its tuning model.

NCCL times every (algorithm, protocol) pair as ``latency + bytes / bandwidth``
and runs the fastest (``src/graph/tuning.cc``, ``ncclTopoTuneModel``; NCCL
2.30's figures, :mod:`msccl_py.tuning.nccl_model` has them all, with their
citations). Then NCCL uses fewer channels for small calls
(``src/enqueue.cc``): one channel per ``threads x threadThreshold`` bytes
(Simple 512 x 64, LL128 640 x 8, LL 512 x 8 x ranks on a ring). On AMD
Instinct machines the choice is RCCL's, from its own tuning model
(:mod:`msccl_py.tuning.rccl`).

:func:`simulate_nccl` predicts what NCCL itself runs at each size (all its
algorithms: ring, tree, NVLS, NVLSTree); :func:`baseline_picks` and
:func:`simulate_baseline` run the library's ring and tree programs as NCCL runs
them (NCCL restricted to that algorithm, as ``NCCL_ALGO`` restricts it).

>>> from msccl_py.topologies import load
>>> [nccl_choice("allreduce", s, load("dgx-a100"))[1] for s in (1 << 10, 1 << 22, 1 << 30)]
['LL', 'LL128', 'Simple']
"""

from __future__ import annotations

from typing import Any

from msccl_py.tuning import nccl_model
from msccl_py.tuning.nccl_model import PROTOCOLS, THREAD_THRESHOLD, THREADS
from msccl_py.tuning.nccl_sim import NcclResult, simulate_nccl
from msccl_py.tuning.rccl import amd_arch, rccl_choice
from msccl_py.topologies.rings import ring_search

#: the algorithms the library's baselines stand for
ALGORITHMS = ("Ring", "Tree")


def nccl_times(collective: str, nbytes: int, topology: Any,
               algorithms: tuple[str, ...] = ALGORITHMS,
               protocols: tuple[str, ...] = PROTOCOLS) -> dict[tuple[str, str], float]:
    """NCCL's model time (µs) of each enabled (algorithm, protocol) for one call."""
    return {k: nccl_model.algo_time(e, *k, collective, nbytes, topology)
            for k, e in nccl_model.nccl_tune(topology, collective).items()
            if k[0] in algorithms and k[1] in protocols}


def nccl_choice(collective: str, nbytes: int, topology: Any,
                algorithms: tuple[str, ...] = ALGORITHMS,
                protocols: tuple[str, ...] = PROTOCOLS) -> tuple[str, str]:
    """(algorithm, protocol) NCCL's model picks for one call of ``nbytes`` among those
    allowed (``NCCL_ALGO`` / ``NCCL_PROTO``); RCCL's on AMD Instinct machines."""
    if amd_arch(topology) is not None:
        return rccl_choice(collective, nbytes, topology, algorithms, protocols)
    times = nccl_times(collective, nbytes, topology, algorithms, protocols)
    if not times:
        raise ValueError(f"no algorithm of {algorithms} with a protocol of {protocols} runs "
                         f"{collective}")
    return min(times, key=times.get)


def nccl_channels(nbytes: int, channels: int, protocol: str, nranks: int,
                  algorithm: str = "Ring") -> int:
    """Channels NCCL runs a call of ``nbytes`` on: one fewer while each would get less than
    ``threads x threadThreshold`` bytes.

    >>> nccl_channels(1 << 30, 12, "Simple", 8), nccl_channels(64 << 10, 12, "Simple", 8)
    (12, 2)
    """
    per = THREADS[protocol] * THREAD_THRESHOLD[protocol]
    if algorithm == "Ring" and protocol == "LL":
        per *= nranks
    return max(1, min(channels, nbytes // per))


#: the library's NCCL baselines: program -> (NCCL algorithm, its channel-count parameter)
BASELINES = {"nccl_ring": ("Ring", "rings"), "nccl_ring_allgather": ("Ring", "rings"),
             "nccl_ring_reduce_scatter": ("Ring", "rings"), "nccl_tree": ("Tree", "trees")}


def baseline_picks(program: str, collective: str, sizes: list[int], topology: Any,
                   protocol: str | None = None,
                   channels: int | None = None) -> list[tuple[str, int]]:
    """(protocol, channels) NCCL runs each size with, for baseline ``program`` on
    ``topology``; ``protocol`` / ``channels`` fix one (``NCCL_PROTO``, a ``rings`` count).

    >>> from msccl_py.topologies import load
    >>> baseline_picks("nccl_ring", "allreduce", [1 << 10, 1 << 30], load("dgx-h100"))
    [('LL', 1), ('Simple', 12)]
    """
    algo, _ = BASELINES[program]
    total = len(ring_search(topology).rings)
    out = []
    for nbytes in sizes:
        proto = protocol or nccl_choice(collective, nbytes, topology, (algo,))[1]
        out.append((proto, channels or nccl_channels(nbytes, total, proto,
                                                     topology.num_nodes(), algo)))
    return out


def tree_channel_limit(machine: Any, topo: Any) -> Any:
    """``machine`` whose threadblocks carry at most NCCL's per-channel tree figure
    (``perChMaxTreeBws``, by GPU generation and node count): what one tree CTA moves."""
    from dataclasses import replace
    arch = nccl_model.arch_of(topo)
    if arch is None:
        return machine
    nodes = nccl_model.nodes_of(topo)
    cap = nccl_model.PER_CH_TREE[nccl_model.generation(arch)][min(nodes, 3) - 1]
    tb = machine.threadblock_bw
    return replace(machine, threadblock_bw=cap if tb is None else min(tb, cap))


def simulate_baseline(program: str, machine: Any, sizes: list[int], *, topology: str,
                      nodes: int | None = None, protocol: str | None = None,
                      channels: int | None = None, instances: int = 1, exact: bool = False):
    """Simulate NCCL baseline ``program`` built for machine file ``topology`` (``nodes``
    copies) as NCCL runs each size (:func:`baseline_picks`): (results, picks).
    ``exact`` times every rank (``simulate``'s).

    ``machine`` is the :class:`~msccl_py.simulate.Machine` to time it on (e.g. a
    calibrated copy of the same machine).
    """
    from dataclasses import replace
    from msccl_py import library
    from msccl_py.simulate import simulate
    from msccl_py.topologies import load
    from msccl_py.library import registry
    spec = registry.get(program)
    # NCCL runs one CTA per channel: its tree's up and down halves share its threadblock
    machine = replace(machine, channel_threadblocks=True)
    topo = load(topology, nodes=nodes)
    if BASELINES[program][0] == "Tree":
        machine = tree_channel_limit(machine, topo)
    picks = baseline_picks(program, spec.operation, sizes, topo, protocol, channels)
    params = {"topology": topology, **({"nodes": nodes} if nodes else {})}
    algs: dict[tuple[str, int], Any] = {}
    results = []
    for nbytes, (proto, count) in zip(sizes, picks):
        alg = algs.get((proto, count))
        if alg is None:
            alg = algs[proto, count] = library.compile(
                program, topo.num_nodes(), instances=instances, protocol=proto,
                **params, **{BASELINES[program][1]: count})
        results.append(simulate(alg, machine, [nbytes], exact=exact)[0])
    return results, picks
