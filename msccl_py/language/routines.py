"""Reusable program fragments (MSCCLang's ``routines``), callable inside a program.

Both work on a ring of ``gpus`` consecutive ranks starting at ``gpu_offset``;
ring rank ``i`` owns chunk ``index_offset + i``.

>>> from msccl_py.language import *
>>> from msccl_py.language.collectives import AllReduce
>>> with MSCCLProgram("ar", None, AllReduce(3, 3, True), 1):
...     allreduce_ring_inplace(3)
...     Check()
True
"""

from __future__ import annotations

from msccl_py.language.buffer import Buffer
from msccl_py.language.program import chunk


def allgather_ring_inplace(gpus: int, gpu_offset: int = 0, index_offset: int = 0,
                           ch: int = 0) -> None:
    """Each ring rank's output chunk ``index_offset + i`` is copied to every other ring rank."""
    for i in range(gpus):
        rank = gpu_offset + i
        index = index_offset + i
        c = chunk(rank, Buffer.output, index)
        for hop in range(1, gpus):
            nxt = gpu_offset + (i + hop) % gpus
            c = c.copy(nxt, Buffer.output, index, ch=ch)


def allreduce_ring_inplace(gpus: int, gpu_offset: int = 0, index_offset: int = 0,
                           ch: int = 0) -> None:
    """Chunk ``index_offset + i`` is reduced around the ring from ring rank ``i``, then shared."""
    for i in range(gpus):
        index = index_offset + i
        c = chunk(gpu_offset + i, Buffer.input, index)
        for hop in range(1, gpus):
            nxt = gpu_offset + (i + hop) % gpus
            c = chunk(nxt, Buffer.input, index).reduce(c, ch=ch)
        for hop in range(0, gpus - 1):
            nxt = gpu_offset + (i + hop) % gpus
            c = c.copy(nxt, Buffer.input, index, ch=ch)


__all__ = ["allgather_ring_inplace", "allreduce_ring_inplace"]
