"""Runtimes that execute lowered algorithms through their plan (:mod:`msccl_py.plan`).

* :mod:`~msccl_py.runtime.reference`: in-process NumPy runtime (``reference.run``).
* :mod:`~msccl_py.runtime.expected`: the correct result with plain NumPy
  (``expected.expected``).
* ``shm``, ``cupy``: multi-process and GPU runtimes (other modules).

Submodules are imported on use so that ``import msccl_py.runtime`` stays cheap.
"""
