"""The compiler: a trace of chunk operations → instruction DAG → passes → ``ir.Algorithm``.

One module per pass, run in this order by :func:`msccl_py.compiler.lower.lower`:
``replicate`` (instances) → ``scratch`` (layout, so the DAG sees physical
slots) → ``dag`` (per-slot hazards, send/recv pairs) → ``fusion``
(rcs/rrs/rrcs) → ``schedule`` (one global order) → ``threadblocks``
(channels and threadblocks, auto or manual) → ``lower`` (the IR steps) →
``dependencies`` (cross-threadblock waits, pruned, written into those steps).
"""
