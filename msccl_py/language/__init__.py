"""The MSCCLang-compatible DSL: ``from msccl_py.language import *``.

>>> from msccl_py.language import *
>>> from msccl_py.language.collectives import AllReduce
>>> from msccl_py.topologies import fully_connected
>>> with MSCCLProgram("ar2", fully_connected(2), AllReduce(2, 2, True), 1):
...     for r in range(2):
...         _ = chunk(r, Buffer.input, r).reduce(chunk(1 - r, Buffer.input, r))
...     for r in range(2):
...         _ = chunk(r, Buffer.input, r).copy(1 - r, Buffer.input, r)
...     Check()
True
"""

from msccl_py.language.buffer import Buffer, Instruction, ThreadblockPolicy
from msccl_py.language.chunk import Chunk, ReduceChunk
from msccl_py.language.chunkref import ChunkRef
from msccl_py.language.emit import XML, emit
from msccl_py.language.program import Check, MSCCLProgram, chunk, create_scratch

# importing the DSL changes nothing in the process: `python prog.py`'s script behaviour
# (msccl_py.language.script) starts with the script's first MSCCLProgram

# msccl-tools' `from msccl.language import *` also hands out these standard-library names
# (its package has no __all__); programs that use them without importing them run here too
import functools, heapq, sys  # noqa: E401,E402
from collections import defaultdict  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from enum import Enum  # noqa: E402

__all__ = ["MSCCLProgram", "chunk", "create_scratch", "Check", "XML", "Buffer",
           "ThreadblockPolicy", "Chunk", "ReduceChunk", "Instruction", "ChunkRef", "emit",
           "functools", "heapq", "sys", "defaultdict", "dataclass", "field", "Enum"]
