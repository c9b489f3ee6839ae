"""Dissemination barrier: ceil(log2 n) rounds of one tiny token, any rank count.

In round k rank r sends what it knows to rank r+2^k (mod n) and folds in
what it got from rank r-2^k, so after ceil(log2 n) rounds every rank has
heard, directly or not, from every rank: nobody leaves before everyone has
arrived. Expressed as a custom collective (Barrier in
msccl_py.library.collectives_extra) on one chunk per rank: a runtime runs it
with any element count, ideally the smallest, and LL.

    python programs/barrier_dissemination.py 6 --protocol LL
"""

import sys

from msccl_py.language import *
from msccl_py.library import patterns, script
from msccl_py.library.collectives_extra import Barrier
from msccl_py.library.spec import ProgramSpec
from msccl_py.topologies import fully_connected


def barrier_dissemination(num_ranks, instances=1, protocol="LL"):
    """Build the dissemination barrier (returns the finished MSCCLProgram).

    >>> barrier_dissemination(8).check()
    True
    """
    patterns.require_ranks("dissemination barrier", num_ranks, minimum=1)
    n = num_ranks
    with MSCCLProgram("barrier_dissemination", fully_connected(n), Barrier(n), instances,
                      protocol=protocol) as prog:
        for r in range(n):
            chunk(r, Buffer.input, 0).copy(r, Buffer.output, 0)
        distance, k = 1, 0
        while distance < n:
            for r in range(n):
                peer = (r + distance) % n
                chunk(r, Buffer.output, 0).copy(peer, "heard", k, ch=patterns.pair_channel(r, peer))
            for r in range(n):
                chunk(r, Buffer.output, 0).reduce(chunk(r, "heard", k))
            distance, k = distance * 2, k + 1
    return prog


SPEC = ProgramSpec(
    "barrier_dissemination", "barrier", "dissemination: ceil(log2 n) rounds of a token",
    build="barrier_dissemination", min_ranks=1, protocols=("LL", "LL128", "Simple"),
    max_bytes=4096)

if __name__ == "__main__":
    sys.exit(script.main(SPEC, barrier_dissemination))
