"""Pipelined chain broadcast: root → root+1 → ... → root-1, data cut into pieces.

Each rank forwards every piece as soon as it arrives, so with ``chunks``
pieces the broadcast takes n-2+chunks piece-steps and every link carries the
data once: bandwidth-optimal for large messages, poor latency for small
ones. Any rank count >= 2, any root.

Parameters: ``root`` (default 0), ``chunks`` (pieces, default 8).

    python programs/broadcast_chain.py 8 --chunks 16 --protocol Simple
"""

import sys

from msccl_py.language import *
from msccl_py.language.collectives import Broadcast
from msccl_py.library import patterns, rooted, script
from msccl_py.library.spec import Param, ProgramSpec
from msccl_py.topologies import fully_connected


def broadcast_chain(num_ranks, instances=1, protocol="Simple", root=0, chunks=8):
    """Build the pipelined chain broadcast (returns the finished MSCCLProgram).

    >>> broadcast_chain(8).check()
    True
    """
    patterns.require_ranks("chain broadcast", num_ranks)
    n = num_ranks
    with MSCCLProgram("broadcast_chain", fully_connected(n), Broadcast(n, chunks, False, root),
                      instances, protocol=protocol) as prog:
        chunk(root, Buffer.input, 0, chunks).copy(root, Buffer.output, 0)
        for k in range(chunks):
            c = chunk(root, Buffer.input, k)
            for hop in range(1, n):
                c = c.copy((root + hop) % n, Buffer.output, k)
    return prog


SPEC = ProgramSpec(
    "broadcast_chain", "broadcast", "pipelined chain, every link carries the data once",
    build="broadcast_chain",
    params=(rooted.root_param("broadcasting rank"),
            Param("chunks", int, 8, "pipelined pieces", low=1, high=32)),
    rank_check=rooted.root_check, protocols=("Simple", "LL128", "LL"), min_bytes=1 << 20)

if __name__ == "__main__":
    sys.exit(script.main(SPEC, broadcast_chain))
