"""The performance model: how long an algorithm takes on a machine, and what limits it.

Public API (stable)::

    simulate(alg, machine, sizes) -> list[Result]
    machine_model(topology) -> Machine        # α/β per path, resources, protocols

``alg`` is an ``ir.Algorithm`` (from ``read_xml``, a program, or
``library.compile``); ``machine`` a :class:`Machine`, a Topology, or a
topology name or path; ``sizes`` an int, a list, or a spec string
(``"1KiB:4GiB"`` doubles, ``"1MiB,64MiB"`` lists). See
``docs/performance-model.md`` for the model.

>>> from msccl_py import library
>>> alg = library.compile("allgather_ring", 8, use_cache=False)
>>> r = simulate(alg, "dgx-h100", "1GiB")[0]
>>> r.bytes, r.bottleneck.startswith("threadblock rank 0")   # one ring channel: its limit
(1073741824, True)
"""

from __future__ import annotations

from dataclasses import replace

from msccl_py import ir
from msccl_py.errors import SimulationError
from msccl_py.plan.tables import plan_for
from msccl_py.simulate.engine import Timing, describe_block, hop_chain, run
from msccl_py.simulate.machine import (PROTOCOLS, Machine, Path, ProtocolModel, Resource,
                                       machine_model)
from msccl_py.simulate.results import JSON_KEYS, Result, busbw_factor, parse_sizes
from msccl_py.simulate.symmetry import Quotient, quotient

#: a resource or threadblock is named alone when it explains this share of the time
BOUND_SHARE = 0.7
#: latency is named only when the hop chain (and the fixed cost) explains this share
LATENCY_SHARE = 0.5
#: a threadblock sending at its link's rate is as busy as the link: within this margin the
#: resource is named (it sets the rate), then the threadblock, then latency
TIE = 0.02


def simulate(alg: ir.Algorithm, machine, sizes, *, protocol: str | None = None,
             timings: list | None = None, labels: bool = True,
             exact: bool = False) -> list[Result]:
    """Predicted :class:`Result` per size of ``alg`` on ``machine`` (see module docstring).

    ``protocol`` overrides the algorithm's; ``timings``, when a list, receives
    each size's :class:`~msccl_py.simulate.engine.Timing` of every step (for
    traces), so it times every rank; ``labels=False`` leaves ``bottleneck``
    empty and skips what only it needs. Ranks a symmetry makes alike are timed
    once (:mod:`~msccl_py.simulate.symmetry`) unless ``exact``.
    """
    m = machine if isinstance(machine, Machine) else machine_model(machine)
    check_ranks(alg.ngpus, m)
    plan = plan_for(alg)
    proto = protocol or alg.protocol
    if not exact and timings is None:
        q = quotient(plan, m, proto)
        plan = plan if q is None else q.plan
    out = []
    for nbytes in parse_sizes(sizes):
        t = run(plan, m, nbytes, proto, chain=False, bounds=labels)
        base = m.fixed_us(proto)
        label = _label(plan, m, nbytes, proto, t, base) if labels else ""
        if timings is not None:
            timings.append(t)
        time_us = t.time_us + base
        algbw = nbytes / (time_us * 1e3)
        out.append(Result(nbytes, time_us, algbw, algbw * busbw_factor(alg.collective,
                                                                        alg.ngpus),
                          label, proto, t.iterations,
                          t.resource_bound_us / t.time_us if t.time_us else 0.0))
    return out


def _label(plan, m: Machine, nbytes: int, proto: str, t: Timing, base: float) -> str:
    """The bottleneck label, with the hop chain's own pass run only where its bounds
    (``t.latency_bounds``, :func:`~msccl_py.simulate.engine.chain_bounds`, and the
    call's time) leave the label open: it names latency, its share or its place, only
    past fixed thresholds of the chain, so equal labels at both bounds are the label.
    ``t.latency_us`` is then the chain, or the upper bound where that was enough."""
    lo, hi = t.latency_bounds
    hi = min(hi, t.time_us)      # the chain is one iteration of the call without its work
    t.latency_us = hi
    label = bottleneck(plan, t, base)
    if lo < hi and label != bottleneck(plan, replace(t, latency_us=lo), base):
        t.latency_us = hop_chain(plan, m, nbytes, proto)
        label = bottleneck(plan, t, base)
    return label


def check_ranks(ranks: int, machine: Machine) -> None:
    """Refuse an algorithm whose rank count is not the machine's GPU count, saying how to match."""
    if ranks == machine.ngpus:
        return
    topo = machine.topology
    per_node = getattr(topo, "gpus_per_node", None) or machine.ngpus
    nodes = getattr(topo, "num_machines", 1) or 1
    build = f"build it for {machine.ngpus} ranks (library programs: --ranks {machine.ngpus})"
    if ranks % per_node == 0 and ranks // per_node != nodes:
        fix = f"simulate {ranks // per_node} nodes of the machine (--nodes {ranks // per_node})"
    else:
        fix = f"simulate it on a machine of {ranks} GPUs"
    raise SimulationError(f"the algorithm has {ranks} ranks but machine '{machine.name}' has "
                          f"{machine.ngpus} GPUs: {fix}, or {build}")


def bound_shares(plan, t: Timing, base_us: float = 0.0,
                 block: str | None = None) -> list[tuple[float, str]]:
    """(share of the call's time, what) for the busiest resource, the busiest threadblock
    (``block`` names it, default ``rank R tb T`` of ``plan``) and the hop chain plus the
    protocol's fixed cost, in the order they are named (the largest first; a resource
    before a threadblock within :data:`TIE`)."""
    total = t.time_us + base_us
    if total <= 0:
        return []
    out = []
    if t.resource:
        out.append((t.resource_bound_us / total, t.resource))
    out.append((t.block_busy_us / total,
                f"threadblock {block or describe_block(plan, t.block)} (in-order steps)"))
    out.append(((t.latency_us + base_us) / total, f"latency: {t.hops} hops"))
    return [s for _, s in sorted(((s[0] + TIE * (len(out) - k), k), s)
                                 for k, s in enumerate(out))[::-1]]


def bottleneck(plan, t: Timing, base_us: float = 0.0, block: str | None = None) -> str:
    """What bounds the call, with its share of the time: the resource or threadblock that
    explains :data:`BOUND_SHARE` of it, the latency chain where that explains
    :data:`LATENCY_SHARE`, else the two largest shares."""
    shares = bound_shares(plan, t, base_us, block)
    if not shares:
        return "nothing to do"
    kept = [(f, w) for f, w in shares if not w.startswith("latency") or f >= LATENCY_SHARE]
    top, what = kept[0]
    if what.startswith("latency"):
        return f"{what}, {_pct(top)}"
    if top >= BOUND_SHARE or len(kept) == 1:
        return f"{what} {_pct(top)}"
    return "; ".join(f"{w}{',' if w.startswith('latency') else ''} {_pct(f)}"
                     for f, w in kept[:2])


def _pct(share: float) -> str:
    return f"{min(share, 9.99) * 100:.0f}%"


__all__ = ["simulate", "machine_model", "Machine", "Path", "Resource", "ProtocolModel",
           "PROTOCOLS", "Result", "JSON_KEYS", "busbw_factor", "parse_sizes", "bottleneck",
           "bound_shares", "check_ranks", "quotient", "Quotient"]
