"""Linear gather: every rank sends its block straight to the root.

One communication step; the root receives n-1 messages concurrently on
separate connections. Simple and latency-optimal, but the root's links
carry everything: best for small messages or few ranks. Any rank count
>= 2, any root.

Parameters: ``root`` (default 0), ``chunks`` (chunks per rank, default 1).

    python programs/gather_linear.py 8 --root 0 --protocol LL
"""

import sys

from msccl_py.language import *
from msccl_py.language.collectives import Gather
from msccl_py.library import patterns, rooted, script
from msccl_py.library.spec import ProgramSpec
from msccl_py.topologies import fully_connected


def gather_linear(num_ranks, instances=1, protocol="LL", root=0, chunks=1):
    """Build the linear gather (returns the finished MSCCLProgram).

    >>> gather_linear(8).check()
    True
    """
    patterns.require_ranks("linear gather", num_ranks, minimum=1)
    n = num_ranks
    with MSCCLProgram("gather_linear", fully_connected(n), Gather(n, chunks, False, root),
                      instances, protocol=protocol) as prog:
        # every rank is a child of the root: one round of direct sends
        rooted.gather(rooted.star(n, root, chunks))
    return prog


SPEC = ProgramSpec(
    "gather_linear", "gather", "every rank sends straight to the root (1 step)",
    build="gather_linear", min_ranks=1,
    params=(rooted.root_param("gathering rank"), rooted.CHUNKS),
    rank_check=rooted.root_check, protocols=("LL", "LL128", "Simple"),
    target_max_ranks=(("rccl", 64),))  # the root needs a threadblock per peer

if __name__ == "__main__":
    sys.exit(script.main(SPEC, gather_linear))
