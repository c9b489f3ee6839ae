"""Static analysis of a lowered :class:`~msccl_py.ir.Algorithm`.

The critical path says how many communication steps a chunk's longest chain
of dependencies needs, which is what the known bounds of collective
algorithms (ring allreduce ``2(n-1)``, recursive doubling ``log2 n``) talk
about; the step counts summarise the program's size against runtime limits.

>>> from msccl_py import library
>>> critical_path(library.compile("allreduce_ring", 8, use_cache=False)).length   # 2(n-1)
14
"""

from msccl_py.analysis.critical_path import CriticalPath, critical_path
from msccl_py.analysis.graph import StepGraph, StepRef, build_graph
from msccl_py.analysis.counts import StepCounts, step_counts

__all__ = ["CriticalPath", "critical_path", "StepGraph", "StepRef", "build_graph",
           "StepCounts", "step_counts"]
