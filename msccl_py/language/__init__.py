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
from msccl_py.language.program import (ChunkRef, Check, MSCCLProgram, XML, chunk, create_scratch,
                                       emit)

__all__ = ["MSCCLProgram", "chunk", "create_scratch", "Check", "XML", "Buffer",
           "ThreadblockPolicy", "Chunk", "ReduceChunk", "Instruction", "ChunkRef", "emit"]
