"""All-pairs alltoall: every rank sends each peer its block directly.

Rank ``r``'s input block ``q`` (``chunks`` chunks, default 1) goes straight to
rank ``q``'s output block ``r``; the local block is a local copy. With the
automatic threadblock policy each peer gets its own send and receive
threadblock, so all ``n - 1`` transfers of a rank run in parallel.

Usage::

    python programs/alltoall_allpairs.py NUM_RANKS [INSTANCES] [--chunks C] [--protocol P]

Any rank count ≥ 2.
"""

import argparse

from msccl_py.errors import ProgramError
from msccl_py.language import *
from msccl_py.language.collectives import AllToAll
from msccl_py.topologies import fully_connected


def alltoall_allpairs(num_ranks: int, instances: int = 1, protocol: str = "Simple",
                      chunks: int = 1) -> MSCCLProgram:
    """Build the all-pairs alltoall (returned after its ``with`` block)."""
    if num_ranks < 2:
        raise ProgramError(f"alltoall needs at least 2 ranks, got {num_ranks}")
    if chunks < 1:
        raise ProgramError(f"chunks must be at least 1, got {chunks}")
    n, c = num_ranks, chunks
    with MSCCLProgram("alltoall_allpairs", fully_connected(n), AllToAll(n, c, False), instances,
                      protocol=protocol) as prog:
        for r in range(n):
            for q in range(n):
                chunk(r, Buffer.input, q * c, c).copy(q, Buffer.output, r * c)
    return prog


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("num_ranks", type=int, nargs="?", help="number of ranks")
    parser.add_argument("instances", type=int, nargs="?", default=1, help="instances")
    parser.add_argument("--ranks", type=int, help="number of ranks (instead of NUM_RANKS)")
    parser.add_argument("--chunks", type=int, default=1, help="chunks per peer block")
    parser.add_argument("--protocol", default="Simple", choices=["Simple", "LL", "LL128"])
    args = parser.parse_args(argv)
    n = args.ranks or args.num_ranks
    if n is None:
        parser.error("give NUM_RANKS or --ranks")
    prog = alltoall_allpairs(n, args.instances, args.protocol, args.chunks)
    with prog:
        Check()
        XML()


if __name__ == "__main__":
    main()
