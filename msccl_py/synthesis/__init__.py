"""Synthesis: bandwidth bounds and schedules built for a machine from its topology.

Public API::

    bound(topology, collective, nodes=None) -> Bound          # the least time, the tight cut
    any_allreduce_bound(topology, nodes=None) -> AnyFormBound  # allreduce, phases overlapped
    synthesize(topology, collective, nodes=None, objective="bandwidth") -> Synthesis

``Synthesis.source`` is the schedule as a readable MSCCLang program,
``Synthesis.algorithm`` its lowered IR, ``Synthesis.xml(target)`` its
verified MSCCL XML. See docs/synthesis.md.

>>> round(bound("dgx1", "allgather").algbw_GBps, 2)
171.43
"""

from msccl_py.synthesis.anyform import AnyFormBound, any_allreduce_bound
from msccl_py.synthesis.bound import Bound, Cut, bound
from msccl_py.synthesis.search import Synthesis, synthesize

__all__ = ["bound", "Bound", "Cut", "any_allreduce_bound", "AnyFormBound", "synthesize",
           "Synthesis"]
