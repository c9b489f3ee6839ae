"""Runtimes that execute lowered algorithms, and the tables and geometry they share.

* :mod:`~msccl_py.runtime.plan`: the IR flattened into NumPy tables (``plan_for``).
* :mod:`~msccl_py.runtime.geometry`: FIFO slots, pipeline slices, size regimes.
* :mod:`~msccl_py.runtime.reference`: in-process NumPy runtime (``reference.run``).
* :mod:`~msccl_py.runtime.expected`: the correct result with plain NumPy
  (``expected.expected``).
* :mod:`~msccl_py.runtime.sizes`: byte-size parsing and chunk splitting.
* ``shm``, ``cupy``: multi-process and GPU runtimes (other modules).

Submodules are imported on use so that ``import msccl_py.runtime`` stays cheap.
"""
