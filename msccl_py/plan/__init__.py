"""The execution plan: the layer every consumer of a lowered algorithm reads.

It sits below the verifier, the simulator and the runtimes, so none of them
imports another to reach it (it imports only ``ir``, ``errors`` and the XML
dialect limits):

* :mod:`~msccl_py.plan.tables`: the IR flattened into NumPy tables (``plan_for``).
* :mod:`~msccl_py.plan.geometry`: FIFO slots, pipeline slices, size regimes.
* :mod:`~msccl_py.plan.sizes`: byte-size parsing and chunk splitting.
* :mod:`~msccl_py.plan.events`: the event model of threadblocks, flags and
  bounded FIFOs (``simulate``), which finds deadlocks and orders execution.
* :mod:`~msccl_py.plan.connections`: FIFO pairing of sends and receives.
* :mod:`~msccl_py.plan.static`: structural rules and runtime limits.
* :mod:`~msccl_py.plan.findings`: what those checks report.
"""
