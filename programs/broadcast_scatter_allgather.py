"""Broadcast as scatter + allgather (van de Geijn), any root, any rank count.

The data is cut into n blocks; the root sends block j straight to rank j
(one step), then a ring allgather (n-1 steps) or an all-pairs allgather
(one step) spreads them. Each rank sends about one data size in total, so
the root is no bottleneck: meant for large messages.
"""

from msccl_py.library.prelude import *

ALLGATHERS = ("ring", "allpairs")


@library_program(
    "broadcast", "scatter blocks from the root, then allgather (ring or all-pairs)",
    params=(rooted.root_param("broadcasting rank"),
            Param("allgather", str, "ring", "allgather phase", choices=ALLGATHERS),
            patterns.RINGS),
    rank_check=rooted.root_check, spread="channels", protocols=("Simple", "LL128", "LL"),
    min_bytes=256 << 10, target_max_ranks=(("rccl", 63),))  # the root: a threadblock per peer
def broadcast_scatter_allgather(n, root=0, allgather="ring", channels=1):
    """Build the scatter + allgather broadcast (returns the finished MSCCLProgram).

    Parameters: ``root`` (default 0), ``allgather`` (ring | allpairs, default ring),
    ``channels`` (rings of a ring allgather; default: the fewest that fit the target).

        python programs/broadcast_scatter_allgather.py 8 --allgather allpairs --protocol LL128
    """
    require_ranks("scatter-allgather broadcast", n)
    if allgather not in ALLGATHERS:
        raise ProgramError(f"broadcast_scatter_allgather: allgather must be ring or allpairs, "
                           f"got {allgather!r}")
    with program(Broadcast(n, n, False, root)):
        patterns.copy_range(root, Buffer.input, 0, n, root, Buffer.output, 0)
        for j in range(n):
            if j != root:
                chunk(root, Buffer.input, j).copy(j, Buffer.output, j)
        ranks = list(range(n))
        if allgather == "ring":
            patterns.ring_allgather(ranks, Buffer.output, lambda j: j, ch=2, rings=channels)
        else:
            patterns.allpairs_allgather(ranks, Buffer.output, lambda j: j)


if __name__ == "__main__":
    sys.exit(broadcast_scatter_allgather.main())
