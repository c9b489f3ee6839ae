"""Pipelined chain broadcast: root → root+1 → ... → root-1, data cut into pieces.

Each rank forwards every piece as soon as it arrives, so with ``chunks``
pieces the broadcast takes n-2+chunks piece-steps and every link carries the
data once: bandwidth-optimal for large messages, poor latency for small
ones. Any rank count >= 2, any root.
"""

from msccl_py.library.prelude import *


@library_program(
    "broadcast", "pipelined chain, every link carries the data once",
    params=(rooted.root_param("broadcasting rank"),
            Param("chunks", int, 8, "pipelined pieces", low=1, high=32)),
    rank_check=rooted.root_check, protocols=("Simple", "LL128", "LL"), min_bytes=1 << 20)
def broadcast_chain(n, root=0, chunks=8):
    """Build the pipelined chain broadcast (returns the finished MSCCLProgram).

    Parameters: ``root`` (default 0), ``chunks`` (pieces, default 8).

        python programs/broadcast_chain.py 8 --chunks 16 --protocol Simple
    """
    require_ranks("chain broadcast", n)
    with program(Broadcast(n, chunks, False, root)):
        chunk(root, Buffer.input, 0, chunks).copy(root, Buffer.output, 0)
        for k in range(chunks):
            c = chunk(root, Buffer.input, k)
            for hop in range(1, n):
                c = c.copy((root + hop) % n, Buffer.output, k)


if __name__ == "__main__":
    sys.exit(broadcast_chain.main())
