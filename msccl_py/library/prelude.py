"""What a library program file starts with: ``from msccl_py.library.prelude import *``.

It hands out the MSCCLang DSL (``chunk``, ``Buffer``, ``MSCCLProgram``, ...,
as ``from msccl_py.language import *`` does), the collectives, the
library's building blocks as modules (``patterns``, ``rooted``), the
declaration (``library_program``, ``program``, ``Param``) and the checks
programs share (``require_ranks``, ``default_split``, ``divides_into_nodes``).

>>> "library_program" in __all__ and "chunk" in __all__ and "Gather" in __all__
True
"""

from msccl_py import language as _language
from msccl_py.errors import ProgramError
from msccl_py.language import *  # noqa: F403
from msccl_py.language.collectives import (AllGather, AllReduce, AllToAll, Broadcast,
                                           Collective, Gather, Reduce, ReduceScatter, Scatter)
from msccl_py.library import patterns, rooted, scaled
from msccl_py.library.collectives_extra import Barrier, SendToNext
from msccl_py.library.declare import library_program, program
from msccl_py.library.patterns import require_power_of_two, require_ranks
from msccl_py.library.spec import Param, default_split, divides_into_nodes
from msccl_py.topologies import fully_connected

__all__ = [*_language.__all__,
           "AllGather", "AllReduce", "AllToAll", "Broadcast", "Collective", "Gather", "Reduce",
           "ReduceScatter", "Scatter", "Barrier", "SendToNext",
           "patterns", "rooted", "scaled", "library_program", "program", "Param", "ProgramError",
           "require_ranks", "require_power_of_two", "default_split", "divides_into_nodes",
           "fully_connected"]
