"""Verifier: executes an ``ir.Algorithm`` symbolically with the MSCCL runtimes' semantics.

``verify(alg)`` returns a :class:`Verdict` whose ``status`` is ``ok``,
``incorrect`` (a wrong output chunk, with what it holds, what it should hold
and the step that last wrote it), ``deadlock`` (the minimal wait cycle, per
message-size regime) or ``invalid`` (a static or connection rule, with rank,
threadblock and step). ``safe_max_bytes`` gives the compiler the largest size
at which an algorithm that deadlocks with large messages is still safe.

It runs the plan-level checks of :mod:`msccl_py.plan` (static rules and
limits, FIFO pairing, the event model per size regime) and adds its own
modules: ``data`` (multiset values), ``races`` (vector-clock data-race
detection), ``postconditions`` (chunk conventions), ``verdict`` (results),
``core`` (``verify``), ``samples`` (IR algorithms for tests and benchmarks).

An ``incorrect`` verdict also covers data races: two accesses to one chunk,
one a write, from threadblocks that no dependency or transfer orders.

>>> from msccl_py import ir
>>> alg = ir.Algorithm("nothing", "custom", "Simple", False, 1, 1, 1, [ir.Gpu(0, 1, 1)])
>>> verify(alg, target="msccl").status
'ok'
"""

from msccl_py.verify.core import regime_settings, resolve_root, safe_max_bytes, verify
from msccl_py.verify.verdict import Finding, RegimeResult, Verdict, Waiter

__all__ = [
           "Finding",
           "RegimeResult",
           "Verdict",
           "Waiter",
           "regime_settings",
           "resolve_root",
           "safe_max_bytes",
           "verify",
]
