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
from msccl_py.library import patterns, script
from msccl_py.library.spec import Param, ProgramSpec
from msccl_py.topologies import fully_connected


def gather_linear(num_ranks, instances=1, protocol="LL", root=0, chunks=1):
    """Build the linear gather (returns the finished MSCCLProgram).

    >>> gather_linear(8).check()
    True
    """
    patterns.require_ranks("linear gather", num_ranks, minimum=1)
    n, c = num_ranks, chunks
    with MSCCLProgram("gather_linear", fully_connected(n), Gather(n, c, False, root),
                      instances, protocol=protocol) as prog:
        for r in range(n):
            chunk(r, Buffer.input, 0, c).copy(root, Buffer.output, r * c)
    return prog


def _root_ok(num_ranks, values):
    if not 0 <= values["root"] < num_ranks:
        return f"root {values['root']} is not a rank of {num_ranks}"
    return None


SPEC = ProgramSpec(
    "gather_linear", "gather", "every rank sends straight to the root (1 step)",
    build="gather_linear", min_ranks=1,
    params=(Param("root", int, 0, "gathering rank", low=0),
            Param("chunks", int, 1, "chunks per rank", low=1, high=16)),
    rank_check=_root_ok, protocols=("LL", "LL128", "Simple"),
    target_max_ranks=(("rccl", 64),))  # the root needs a threadblock per peer

if __name__ == "__main__":
    sys.exit(script.main(SPEC, gather_linear))
