"""The pieces NCCL moves a call's data in (``calcCollChunking``, ``src/enqueue.cc``, NCCL
2.30 at commit 5067397c), which set how a pipeline fills: NVLS / NVLSTree pieces per
head and a tree's pieces per channel. A buffer step is the default buffer over
``NCCL_STEPS`` (``src/init.cc``: DEFAULT_LL_BUFFSIZE 8 lines x 512 threads x 8 steps x
16 B, DEFAULT_LL128_BUFFSIZE 120 x 640 x 8 x 8 B, DEFAULT_BUFFSIZE 4 MiB; the plan's
FIFO geometry holds the same figures).
"""

from __future__ import annotations

import math

from msccl_py.plan.geometry import DEFAULT_BUFFSIZE, NCCL_STEPS

#: NCCL_NVLS_CHUNKSIZE's default (src/transport/nvls.cc): bytes per NVLS pipeline piece
NVLS_CHUNK = 128 << 10


def nvls_chunk(algo: str, nbytes: int, channels: int, heads: int) -> int:
    """The piece NCCL moves NVLS / NVLSTree data in for a call of ``nbytes``
    (``calcCollChunking`` in ``src/enqueue.cc``): ``NCCL_NVLS_CHUNKSIZE`` (128 KiB), cut
    down while the call is small against its concurrent operations (channels x NVLS heads,
    one head per GPU of the node)."""
    ops = channels * heads
    chunk = NVLS_CHUNK
    cuts = ((64, 64 << 10), (8, 32 << 10), (2, 16 << 10)) if algo == "NVLS" else \
        ((32, 256 << 10), (16, 128 << 10), (4, 64 << 10), (1, 32 << 10))
    for times, size in cuts:
        if nbytes < times * ops * chunk and chunk > size:
            chunk = size
    return chunk


def tree_chunk(proto: str, nbytes: int, channels: int, nodes: int, ppn: float) -> int:
    """The piece a tree moves per step for a call of ``nbytes`` (``calcCollChunking`` in
    ``src/enqueue.cc``): one buffer step (half of it data for LL, 15 of 16 words for
    LL128), and for LL128 halved while each channel would get fewer than
    ``nstepsLL128 x 64 / ppn`` pieces (down to 128 KiB), then ``x 16 / ppn`` (down to
    32 KiB), ``nstepsLL128 = 1 + log2(nodes) + 0.1 ppn``."""
    chunk = DEFAULT_BUFFSIZE[proto] // NCCL_STEPS
    if proto == "LL":
        chunk //= 2
    elif proto == "LL128":
        chunk = chunk // 16 * 15
        steps = 1 + int(math.log2(nodes)) + 0.1 * ppn
        while nbytes // (channels * chunk) < steps * 64 / ppn and chunk > 131072:
            chunk //= 2
        while nbytes // (channels * chunk) < steps * 16 / ppn and chunk > 32768:
            chunk //= 2
    return chunk
