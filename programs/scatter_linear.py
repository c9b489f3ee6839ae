"""Linear scatter: the root sends block r straight to rank r.

One communication step on n-1 concurrent connections out of the root. Best
for small messages or few ranks. Any rank count >= 2, any root.

Parameters: ``root`` (default 0), ``chunks`` (chunks per rank, default 1).

    python programs/scatter_linear.py 8 --root 0 --protocol LL
"""

import sys

from msccl_py.language import *
from msccl_py.language.collectives import Scatter
from msccl_py.library import patterns, script
from msccl_py.library.spec import Param, ProgramSpec
from msccl_py.topologies import fully_connected


def scatter_linear(num_ranks, instances=1, protocol="LL", root=0, chunks=1):
    """Build the linear scatter (returns the finished MSCCLProgram).

    >>> scatter_linear(8).check()
    True
    """
    patterns.require_ranks("linear scatter", num_ranks, minimum=1)
    n, c = num_ranks, chunks
    with MSCCLProgram("scatter_linear", fully_connected(n), Scatter(n, c, False, root),
                      instances, protocol=protocol) as prog:
        for r in range(n):
            chunk(root, Buffer.input, r * c, c).copy(r, Buffer.output, 0)
    return prog


def _root_ok(num_ranks, values):
    if not 0 <= values["root"] < num_ranks:
        return f"root {values['root']} is not a rank of {num_ranks}"
    return None


SPEC = ProgramSpec(
    "scatter_linear", "scatter", "the root sends straight to every rank (1 step)",
    build="scatter_linear", min_ranks=1,
    params=(Param("root", int, 0, "scattering rank", low=0),
            Param("chunks", int, 1, "chunks per rank", low=1, high=16)),
    rank_check=_root_ok, protocols=("LL", "LL128", "Simple"),
    target_max_ranks=(("rccl", 64),))  # the root needs a threadblock per peer

if __name__ == "__main__":
    sys.exit(script.main(SPEC, scatter_linear))
