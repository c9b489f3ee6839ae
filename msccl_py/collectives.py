"""Compatibility: ``from msccl_py.collectives import *`` for MSCCLang programs that import
``msccl.collectives``.

msccl-tools' top-level ``collectives`` module belongs to its synthesizer;
MSCCLang programs often import it without using it. Here it offers the DSL's
collectives (:mod:`msccl_py.language.collectives`) under the same import.

>>> from msccl_py.collectives import *
>>> AllReduce(2, 2, True).name
'allreduce'
"""

from msccl_py.language.collectives import (AllGather, AllReduce, AllToAll, Broadcast, Collective,
                                           Gather, Reduce, ReduceScatter, Scatter)

__all__ = ["Collective", "AllReduce", "AllGather", "AllToAll", "ReduceScatter", "Broadcast",
           "Reduce", "Gather", "Scatter"]
