"""All-pairs allgather: every rank sends its block straight to every other rank.

One communication step and n-1 connections per rank; meant for small
messages on fully connected machines. Any rank count >= 2.

Parameters: ``inplace`` (default false).

    python programs/allgather_allpairs.py 8 --instances 2 --protocol LL
"""

import sys

from msccl_py.language import *
from msccl_py.language.collectives import AllGather
from msccl_py.library import patterns, script
from msccl_py.library.spec import ProgramSpec
from msccl_py.topologies import fully_connected


def allgather_allpairs(num_ranks, instances=1, protocol="LL", inplace=False):
    """Build the all-pairs allgather (returns the finished MSCCLProgram).

    >>> allgather_allpairs(8).check()
    True
    """
    patterns.require_ranks("all-pairs allgather", num_ranks, minimum=1)
    n = num_ranks
    with MSCCLProgram("allgather_allpairs", fully_connected(n), AllGather(n, 1, inplace),
                      instances, protocol=protocol) as prog:
        for r in range(n):
            c = chunk(r, Buffer.input, 0)
            if not inplace:
                c.copy(r, Buffer.output, r)
            for peer in range(n):
                if peer != r:
                    c.copy(peer, Buffer.output, r)
    return prog


SPEC = ProgramSpec(
    "allgather_allpairs", "allgather", "all-pairs: one direct send to every rank",
    build="allgather_allpairs", min_ranks=1,
    params=(patterns.INPLACE["allgather"],),
    protocols=("LL", "LL128", "Simple"), max_bytes=256 << 10,
    target_max_ranks=(("rccl", 64),))  # a threadblock per peer; RCCL runs 64

if __name__ == "__main__":
    sys.exit(script.main(SPEC, allgather_allpairs))
