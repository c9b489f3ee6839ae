"""The compiler: a trace of chunk operations → instruction DAG → passes → ``ir.Algorithm``.

One module per pass, run in this order by :func:`msccl_py.compiler.lower.lower`:
``replicate`` (instances) → ``dag`` (per-slot hazards, send/recv pairs) →
``fusion`` (rcs/rrs/rrcs) → ``schedule`` (one global order) → ``threadblocks``
(channels and threadblocks, auto or manual) → ``dependencies`` (cross-threadblock
waits, pruned) → ``scratch`` (layout) → ``lower`` (the IR).
"""
