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
>>> r.bytes, r.bottleneck.startswith("switch nvswitch port")
(1073741824, True)
"""

from __future__ import annotations

from msccl_py import ir
from msccl_py.plan.tables import plan_for
from msccl_py.simulate.engine import Timing, describe_block, run
from msccl_py.simulate.machine import (PROTOCOLS, Machine, Path, ProtocolModel, Resource,
                                       machine_model)
from msccl_py.simulate.results import JSON_KEYS, Result, busbw_factor, parse_sizes

#: a time bound counts as the bottleneck when it explains this share of the time
BOUND_SHARE = 0.7


def simulate(alg: ir.Algorithm, machine, sizes, *, protocol: str | None = None,
             timings: list | None = None) -> list[Result]:
    """Predicted :class:`Result` per size of ``alg`` on ``machine`` (see module docstring).

    ``protocol`` overrides the algorithm's; ``timings``, when a list, receives
    each size's :class:`~msccl_py.simulate.engine.Timing` (for traces).
    """
    m = machine if isinstance(machine, Machine) else machine_model(machine)
    plan = plan_for(alg)
    proto = protocol or alg.protocol
    out = []
    for nbytes in parse_sizes(sizes):
        t = run(plan, m, nbytes, proto)
        if timings is not None:
            timings.append(t)
        base = m.protocol(proto).base_us
        time_us = t.time_us + base
        algbw = nbytes / (time_us * 1e3)
        out.append(Result(nbytes, time_us, algbw, algbw * busbw_factor(alg.collective,
                                                                        alg.ngpus),
                          bottleneck(plan, t), proto, t.iterations,
                          t.resource_bound_us / t.time_us if t.time_us else 0.0))
    return out


def bottleneck(plan, t: Timing) -> str:
    """What bounds ``t``: the fullest resource, the busiest threadblock, or the latency chain."""
    if t.time_us <= 0:
        return "nothing to do"
    if t.resource and t.resource_bound_us >= BOUND_SHARE * t.time_us:
        return t.resource
    if t.block_busy_us >= BOUND_SHARE * t.time_us:
        return f"threadblock {describe_block(plan, t.block)}"
    return f"latency: {t.hops} sequential hops"


__all__ = ["simulate", "machine_model", "Machine", "Path", "Resource", "ProtocolModel",
           "PROTOCOLS", "Result", "JSON_KEYS", "busbw_factor", "parse_sizes", "bottleneck"]
