"""Ring allreduce: a reduce-scatter ring followed by an allgather ring.

Each rank's buffer is split into ``num_ranks`` chunks; chunk ``k`` starts at
rank ``k``, is reduced hop by hop around the ring (``num_ranks - 1`` hops)
and the result travels on around it (another ``num_ranks - 1`` hops), so
every chunk crosses ``2(n-1)`` links. Chunks are dealt round-robin to
``channels`` rings that run in parallel, each on its own channel and (with
``--manual``) its own threadblock. In-place.

Usage::

    python programs/allreduce_ring.py NUM_RANKS [CHANNELS] [INSTANCES] [--protocol P] [--auto]

``CHANNELS`` (default 1) rings per rank; ``INSTANCES`` (default 1) copies of the
whole algorithm on disjoint sub-chunks; ``--auto`` lets the compiler pick
threadblocks instead of one threadblock per channel. Any rank count ≥ 2.
"""

from msccl_py.errors import ProgramError
from msccl_py.language import *
from msccl_py.language.collectives import AllReduce
from msccl_py.library import script
from msccl_py.topologies import fully_connected


def allreduce_ring(num_ranks: int, channels: int = 1, instances: int = 1,
                   protocol: str = "Simple", manual: bool = True) -> MSCCLProgram:
    """Build the ring allreduce program (returned after its ``with`` block)."""
    if num_ranks < 2:
        raise ProgramError(f"ring allreduce needs at least 2 ranks, got {num_ranks}")
    if not 1 <= channels <= num_ranks:
        raise ProgramError(f"channels must be between 1 and the rank count {num_ranks}, "
                           f"got {channels}")
    policy = ThreadblockPolicy.manual if manual else ThreadblockPolicy.auto
    n = num_ranks
    with MSCCLProgram(f"allreduce_ring_{channels}ch", fully_connected(n), AllReduce(n, n, True),
                      instances, protocol=protocol, threadblock_policy=policy) as prog:
        for step in range(n - 1):
            for k in range(n):
                src = (k + step) % n
                dst = (k + step + 1) % n
                ch = k % channels
                chunk(dst, Buffer.input, k).reduce(chunk(src, Buffer.input, k), ch=ch,
                                                   sendtb=ch, recvtb=ch)
        for step in range(n - 1):
            for k in range(n):
                src = (k + step - 1) % n
                dst = (k + step) % n
                ch = k % channels
                chunk(src, Buffer.input, k).copy(dst, Buffer.input, k, ch=ch, sendtb=ch,
                                                 recvtb=ch)
    return prog


def main(argv=None) -> None:
    parser = script.ranks_parser(__doc__, ("channels", "rings (channels)"),
                                 ("instances", "instances"))
    parser.add_argument("--auto", action="store_true", help="automatic threadblocks")
    args = parser.parse_args(argv)
    prog = allreduce_ring(script.given_ranks(parser, args), args.channels, args.instances,
                          args.protocol, not args.auto)
    with prog:
        Check()
        XML()


if __name__ == "__main__":
    main()
