"""Dissemination barrier: ceil(log2 n) rounds of one tiny token, any rank count.

In round k rank r sends what it knows to rank r+2^k (mod n) and folds in
what it got from rank r-2^k, so after ceil(log2 n) rounds every rank has
heard, directly or not, from every rank: nobody leaves before everyone has
arrived. Expressed as a custom collective (Barrier in
msccl_py.library.collectives_extra) on one chunk per rank: a runtime runs it
with any element count, ideally the smallest, and LL.
"""

from msccl_py.library.prelude import *


@library_program("barrier", "dissemination: ceil(log2 n) rounds of a token", min_ranks=1,
                 protocols=("LL", "LL128", "Simple"), max_bytes=4096)
def barrier_dissemination(n):
    """Build the dissemination barrier (returns the finished MSCCLProgram).

        python programs/barrier_dissemination.py 6 --protocol LL
    """
    require_ranks("dissemination barrier", n, minimum=1)
    with program(Barrier(n)):
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


if __name__ == "__main__":
    sys.exit(barrier_dissemination.main())
