"""Ring allgather: every rank's chunk travels once around the ring.

Rank ``r``'s ``chunks`` input chunks (default 1) are copied into its own
output block and then forwarded ``n - 1`` hops to every other rank. With
``CHANNELS`` > 1 the chunks are dealt to that many parallel rings; with
``--rings R`` each ring's blocks are dealt by source rank to ``R`` channels
(the library picks the fewest that fit the target's steps per threadblock).
Runs out of place by default, in place with ``--inplace``.

Usage::

    python programs/allgather_ring.py NUM_RANKS [CHANNELS] [INSTANCES] [--protocol P] [--inplace]
                                      [--rings R]

Any rank count ≥ 2; ``CHANNELS`` ≥ 1 rings, each carrying one chunk of every rank.
"""

from msccl_py.errors import ProgramError
from msccl_py.language import *
from msccl_py.language.collectives import AllGather
from msccl_py.library import script
from msccl_py.topologies import fully_connected


def allgather_ring(num_ranks: int, channels: int = 1, instances: int = 1,
                   protocol: str = "Simple", inplace: bool = False,
                   rings: int = 1) -> MSCCLProgram:
    """Build the ring allgather; each rank's buffer is ``channels`` chunks, one per ring,
    and rank ``r``'s chunk ``k`` rides channel ``k * rings + r % rings``."""
    if num_ranks < 2:
        raise ProgramError(f"ring allgather needs at least 2 ranks, got {num_ranks}")
    if channels < 1:
        raise ProgramError(f"channels must be at least 1, got {channels}")
    if not 1 <= rings <= num_ranks:
        raise ProgramError(f"rings must be between 1 and the rank count {num_ranks}, "
                           f"got {rings}")
    n, c = num_ranks, channels
    with MSCCLProgram(f"allgather_ring_{c}ch", fully_connected(n), AllGather(n, c, inplace),
                      instances, protocol=protocol) as prog:
        for r in range(n):
            for k in range(c):
                ref = chunk(r, Buffer.input, k)
                if not inplace:
                    ref = ref.copy(r, Buffer.output, r * c + k)
                for hop in range(1, n):
                    ref = ref.copy((r + hop) % n, Buffer.output, r * c + k,
                                   ch=k * rings + r % rings)
    return prog


def main(argv=None) -> None:
    parser = script.ranks_parser(__doc__, ("channels", "parallel rings"),
                                 ("instances", "instances"))
    parser.add_argument("--inplace", action="store_true", help="in-place allgather")
    parser.add_argument("--rings", type=int, default=1, help="channels per ring")
    args = parser.parse_args(argv)
    prog = allgather_ring(script.given_ranks(parser, args), args.channels, args.instances,
                          args.protocol, args.inplace, args.rings)
    with prog:
        Check()
        XML()


if __name__ == "__main__":
    main()
